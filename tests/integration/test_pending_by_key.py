"""``GET /v1/topics/{topic}/pending?key=`` on a real 3-node cluster: a message found by its
producer key while it is scheduled, under its original id at its new time once
rescheduled, nothing once cancelled or delivered; the same answers from the master that
takes over after a SIGKILL; the SDK, the CLI and the refusals."""

from __future__ import annotations

import asyncio
import json
import signal
import time

import pytest
from click.testing import CliRunner

from horologe.cli import main
from horologe.client import AsyncClient, Client, InvalidRequestError
from horologe.storage import check_store
from testkit.process_cluster import CLIENT
from testkit.waiting import wait_until


def found(c: Client, key: str, topic: str = "pk", **kw) -> list[tuple[str, int]]:
    """(id, fires_at) of what the key finds: nothing, or one message."""
    page = c.pending(topic, key=key, **kw)
    assert page.next_cursor is None and len(page.messages) <= 1
    return [(m.id, m.fires_at) for m in page.messages]


def test_pending_by_key_follows_moves_cancels_deliveries_and_a_master_kill(cluster):
    c = Client([cluster.url(i) for i in cluster.indexes], CLIENT, retry_s=20)
    now = int(time.time() * 1000)
    far = now + 3_600_000
    a = c.produce("pk", "alpha", deliver_at=far, key="order-1", tags=["x"])
    b = c.produce("pk", "beta", deliver_at=far + 1, key="order-2")
    soon = c.produce("pk", "soon", deliver_at=now + 1_500, key="order-3")
    c.produce("other", "gamma", deliver_at=far, key="order-1")  # the same key, another topic

    assert found(c, "order-1") == [(a.id, far)]
    page = c.pending("pk", key="order-1", with_body=True)
    (m,) = page.messages
    assert (m.key, m.tags, m.body, m.deliver_at) == ("order-1", ("x",), b"alpha", far)
    assert c.pending("pk", key="order-1").messages[0].body is None  # bodies only when asked
    assert found(c, "no-such-key") == [] and found(c, "order-1", topic="never-used") == []

    # rescheduled by key, then by id: found under the original id, at the new time
    c.reschedule_key("pk", "order-1", deliver_at=far + 60_000)
    assert found(c, "order-1") == [(a.id, far + 60_000)]
    c.reschedule(a.id, deliver_at=far + 7_200_000)  # into another hour
    assert found(c, "order-1") == [(a.id, far + 7_200_000)]
    c.cancel(b.id)
    assert found(c, "order-2") == []
    wait_until(lambda: c.status(soon.id).state == "delivered", 20)
    assert found(c, "order-3") == []

    # the master SIGKILLed: the next one answers from its own key index the same way
    old = cluster.wait_leader()
    cluster.signal(old, signal.SIGKILL)
    cluster.wait_leader([i for i in cluster.indexes if i != old], exclude=old)
    assert found(c, "order-1") == [(a.id, far + 7_200_000)]
    assert found(c, "order-2") == [] and found(c, "order-3") == []
    c.reschedule_key("pk", "order-1", deliver_at=far + 5_000)
    assert found(c, "order-1") == [(a.id, far + 5_000)]
    d = c.produce("pk", "delta", deliver_at=far, key="order-4")  # keyed under the new master
    assert found(c, "order-4") == [(d.id, far)]

    async def by_async_client() -> list:
        async with AsyncClient([cluster.url(i) for i in cluster.indexes], CLIENT, retry_s=20) as ac:
            pages = [await ac.pending("pk", key=k, with_body=True) for k in ("order-1", "order-2")]
        return [[(m.id, m.fires_at, m.body) for m in p.messages] for p in pages]

    assert asyncio.run(by_async_client()) == [[(a.id, far + 5_000, b"alpha")], []]

    # the CLI: one JSON line, or exit 1 when nothing is pending under the key
    master = cluster.wait_leader([i for i in cluster.indexes if i != old])
    args = ["pending", "--url", cluster.url(master), "--token", CLIENT, "--topic", "pk"]
    shown = CliRunner().invoke(main, [*args, "--key", "order-1", "--with-body"])
    assert shown.exit_code == 0, shown.output
    line = json.loads(shown.output)
    assert (line["id"], line["fires_at"], line["body"], line["key"]) == (
        a.id,
        far + 5_000,
        "alpha",
        "order-1",
    )
    missing = CliRunner().invoke(main, [*args, "--key", "order-2"])
    assert missing.exit_code == 1 and "order-2" in missing.output
    assert CliRunner().invoke(main, [*args, "--key", "order-1", "--from", "1"]).exit_code == 2  # usage

    cluster.start(old)
    cluster.catch_up(old)
    cluster.stop_all()
    for i in cluster.indexes:
        check_store(cluster.store(i))


REFUSALS = [
    ("key=k&cursor=AQ", 400, "conflicting_fields", "cursor"),
    ("key=k&from=5", 400, "conflicting_fields", "from"),
    ("to=9&key=k", 400, "conflicting_fields", "to"),
    ("key=", 400, "invalid_field", "key"),
    (f"key={'k' * 257}", 400, "invalid_field", "key"),
    ("key=k&limit=0", 422, "out_of_range", "limit"),
    ("key=k&with_body=yes", 400, "invalid_field", "with_body"),
]


def test_bad_key_queries_are_refused_with_the_error_shape(cluster):
    master = cluster.wait_leader()
    for query, status, code, field in REFUSALS:
        r = cluster.to_master("GET", f"/v1/topics/pk/pending?{query}", token=CLIENT)
        err = r.body["error"]
        assert (r.status, err["code"], err.get("field")) == (status, code, field), query
    c = Client([cluster.url(i) for i in cluster.indexes], CLIENT, retry_s=20)
    with pytest.raises(InvalidRequestError) as e:
        c.pending("pk", 0, key="k")
    assert (e.value.status, e.value.code, e.value.field) == (400, "conflicting_fields", "from")
    follower = next(i for i in cluster.indexes if i != master)
    r = cluster.http.get(f"{cluster.url(follower)}/v1/topics/pk/pending?key=k", token=CLIENT)
    assert r.status == 307  # served by the master, as the list is
