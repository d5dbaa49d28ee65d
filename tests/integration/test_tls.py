"""HTTPS end to end: three node processes serving TLS, with a CA and node certificates
made at test time (testkit/tls.py). Clients trust that CA through ``ca=`` / ``--ca``."""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from horologe.cli import main
from horologe.client import AsyncClient, CertificateError, Client, RawClient, UnavailableError
from horologe.pipeline.poster import post_messages
from horologe.storage import ready_ids
from testkit.process_cluster import ADMIN, CLIENT

from .history import verify_ready_logs
from .load import wait_delivered


def test_https_end_to_end(make_cluster, tmp_path):
    cluster = make_cluster(tls=True)
    master = cluster.wait_connected()
    follower = next(i for i in cluster.indexes if i != master)
    assert cluster.url(follower).startswith("https://")
    acked: dict[str, int] = {}

    # A follower sends writes to the master's https:// address, not http://.
    r = cluster.http.post(f"{cluster.url(follower)}/v1/messages", {"topic": "tls", "body": "x"}, token=CLIENT)
    assert r.status == 307 and r.headers["Location"] == f"{cluster.url(master)}/v1/messages"
    peers = {p["node_id"]: p["http"] for p in cluster.status(follower)["peers"]}
    assert peers[f"n{master + 1}"] == cluster.url(master)

    # The SDK, given only the follower, follows that 307 over HTTPS: produce, consume, ack.
    with Client([cluster.url(follower)], CLIENT, ca=cluster.ca) as c:
        s = c.produce("tls", "over https", tags=["a"])
        acked[s.id] = s.deliver_at
        assert c.endpoints.master == cluster.url(master)
        (m,) = c.pull("tls", "g", wait_ms=5_000)
        assert (m.id, m.body) == (s.id, b"over https")
        c.ack("tls", "g", [m.receipt])
        assert c.status(s.id).state == "delivered"

    async def produce_async() -> None:
        async with AsyncClient([cluster.url(follower)], CLIENT, ca=cluster.ca) as ac:
            s = await ac.produce("tls", "async over https")
            acked[s.id] = s.deliver_at

    asyncio.run(produce_async())
    posted = post_messages(
        [{"topic": "tls", "body": "pipeline"}], [cluster.url(follower)], CLIENT, ca=cluster.ca
    )
    assert posted.accepted == 1

    # Without the CA every client is refused before it sends anything; nothing is stored.
    with Client([cluster.url(follower)], CLIENT, retry_s=5) as c, pytest.raises(CertificateError):
        c.produce("tls", "never stored")
    with RawClient() as raw, pytest.raises(CertificateError):
        raw.post(f"{cluster.url(master)}/v1/messages", {"topic": "tls", "body": "never"}, token=CLIENT)
    # and the API is not served in clear on the same port
    with RawClient() as raw, pytest.raises(UnavailableError):
        raw.get(cluster.url(master).replace("https://", "http://") + "/healthz")

    # The command line: --ca or HOROLOGE_CA; without, exit 1 saying why.
    cli = CliRunner()
    url = ["--url", cluster.url(follower)]
    produce = ["produce", *url, "--token", CLIENT, "--topic", "tls", "--body", "cli"]
    out = cli.invoke(main, [*produce, "--ca", cluster.ca])
    assert out.exit_code == 0, out.output
    acked[json.loads(out.output)["id"]] = json.loads(out.output)["deliver_at"]
    status = ["status", *url, "--admin-token", ADMIN]
    out = cli.invoke(main, status, env={"HOROLOGE_CA": cluster.ca})
    assert out.exit_code == 0 and json.loads(out.output)["node_id"] == f"n{follower + 1}", out.output
    out = cli.invoke(main, produce, env={"HOROLOGE_CA": None})
    assert out.exit_code == 1 and "did not verify" in out.output, out.output
    plain = ["--url", cluster.url(follower).replace("https://", "http://")]
    out = cli.invoke(main, ["--retry-for", "0", *produce, *plain])  # the later --url wins
    assert out.exit_code == 1 and "give its URL as https://" in out.output, out.output
    rows = tmp_path / "rows.csv"
    rows.write_text("b\nspark\n")
    spark = ["spark", "schedule", str(rows), *url, "--token", CLIENT]
    out = cli.invoke(main, [*spark, "--topic", "tls", "--body-col", "b"], env={"HOROLOGE_CA": None})
    assert out.exit_code == 1 and "did not verify" in out.output, out.output  # before Spark starts

    # The node's own calls to peers go over HTTPS too: a release reads the target's
    # /readyz to pick it, and the others' to confirm they follow it.
    res = cluster.client(master).release_master()
    assert res["new_master"] != f"n{master + 1}"
    assert sorted(res["heard_by"]) == ["n1", "n2", "n3"], res

    # The new master delivers what fell due during the release; the old one applies it
    # only once its next append comes, and a stop before then leaves its ready log short.
    wait_delivered(cluster, at_least=len(acked))
    cluster.stop_all()
    verify_ready_logs(cluster, "tls", acked)
    with cluster.store(0) as store:
        delivered = ready_ids(store.read_ready("tls"))
    assert len(delivered) == len(acked) + 1  # and the one the pipeline posted; nothing refused got in
