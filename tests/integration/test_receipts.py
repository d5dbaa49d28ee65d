"""Receipts cannot be forged, borrowed from another group, or repeated to multiply retries."""

from __future__ import annotations

import time

from horologe.client import Reply
from testkit.process_cluster import CLIENT

from .test_consumers import SHORT_RETRIES, client, drain


def _post(cluster, path: str, body: dict) -> Reply:
    return cluster.to_master("POST", path, body, token=CLIENT)


def _refused(cluster, path: str, body: dict) -> None:
    r = _post(cluster, path, body)
    assert r.status == 400 and r.body["error"]["code"] == "invalid_receipt", r.body


def test_forged_and_borrowed_receipts_are_refused_and_nothing_is_lost(cluster):
    c = client(cluster)
    # Forged before delivery (as a careless or hostile client could), and absurd.
    for forged in [f"{k}.1.t" for k in range(10)] + [f"{2**70}.1.t", "nonsense", "0.1.00.t"]:
        _refused(cluster, "/v1/topics/t/ack", {"group": "g", "receipts": [forged]})
        _refused(cluster, "/v1/topics/t/nack", {"group": "g", "receipts": [forged]})
    later = int(time.time() * 1000) + 1_000
    sent = c.produce_batch([{"topic": "t", "body": f"{k}", "deliver_at": later} for k in range(10)])
    ids = {s.id for s in sent}
    other = c.pull("t", "other-group", max=10, wait_ms=5_000)
    assert other
    _refused(cluster, "/v1/topics/t/ack", {"group": "g", "receipts": [other[0].receipt]})  # not g's
    tampered = other[0].receipt.rsplit(".", 1)[0] + ".u"  # same mac, another topic
    _refused(cluster, "/v1/topics/u/ack", {"group": "other-group", "receipts": [tampered]})
    # A good receipt sent to another topic's path: the caller's mix-up, not an ack of t's message.
    for verb in ("ack", "nack", "release"):
        _refused(cluster, f"/v1/topics/u/{verb}", {"group": "other-group", "receipts": [other[0].receipt]})
    _refused(
        cluster,
        "/v1/topics/u/extend",
        {"group": "other-group", "receipts": [other[0].receipt], "visibility_ms": 5_000},
    )
    assert c.ack("t", "other-group", [m.receipt for m in other]) == len(other)
    assert {m.id for m in drain(c, "t", "g")} == ids  # every message still reaches g


def test_a_receipt_repeated_in_a_nack_retries_its_message_once(make_cluster):
    cluster = make_cluster(extra_toml=SHORT_RETRIES)
    c = client(cluster)
    c.produce("jobs", "run me")
    (first,) = c.pull("jobs", "workers", wait_ms=5_000)
    res = _post(
        cluster, "/v1/topics/jobs/nack", {"group": "workers", "receipts": [first.receipt] * 500}
    ).result()
    assert res == {"retried": 1, "dead_lettered": 0}
    again = drain(c, "jobs", "workers", idle_s=2.0)
    assert [(m.body, m.attempt) for m in again] == [(b"run me", 1)]  # one copy, a retry
    # a second nack of the same hand-out, after it was retried, makes no further copy, and
    # its answer says so
    res = _post(cluster, "/v1/topics/jobs/nack", {"group": "workers", "receipts": [first.receipt]}).result()
    assert res == {"retried": 0, "dead_lettered": 0}
    assert drain(c, "jobs", "workers", idle_s=1.5) == []
