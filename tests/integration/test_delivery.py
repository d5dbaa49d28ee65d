"""Produce on a real 3-node cluster; every message delivered once, on time, on every node."""

from __future__ import annotations

import time

import pytest

from horologe.client import HorologeError
from testkit.waiting import wait_until

from .history import verify_ready_logs
from .load import wait_delivered


def test_produce_then_delivered_on_time_never_early(cluster):
    now = int(time.time() * 1000)
    acked = {}
    for i in cluster.indexes:  # through every node: followers redirect to the master
        msgs = [{"topic": "orders", "body": f"{i}-{k}", "deliver_at": now + 300 + 37 * k} for k in range(60)]
        msgs.append({"topic": "orders", "body": "in the past", "deliver_at": now - 60_000})
        msgs.append({"topic": "orders", "body": "after", "deliver_after": "2s", "tags": ["vip"]})
        for r in cluster.produce(i, msgs):
            acked[r["id"]] = r["deliver_at"]
    one = (
        cluster.client(0)
        .request("POST", "/v1/messages", {"topic": "orders", "body_b64": "aGk=", "delay_level": 1})
        .body
    )
    acked[one["id"]] = one["deliver_at"]
    assert len(acked) == 3 * 62 + 1
    wait_delivered(cluster)
    st = cluster.client(1).request("GET", f"/v1/messages/{one['id']}").body
    assert st["state"] == "delivered" and st["delivered_at"] >= st["deliver_at"] == one["deliver_at"]
    cluster.stop_all()
    lateness = verify_ready_logs(cluster, "orders", acked)
    print(
        f"lateness over {lateness['n']} messages: p50 {lateness['p50']:.0f} ms, "
        f"p99 {lateness['p99']:.0f} ms, max {lateness['max']:.0f} ms"
    )


def test_cancel_before_and_after_delivery(cluster):
    now = int(time.time() * 1000)
    soon, later = cluster.produce(
        0,
        [
            {"topic": "t", "body": "soon", "deliver_at": now + 200},
            {"topic": "t", "body": "later", "deliver_at": now + 60_000, "key": "order-7"},
        ],
    )

    def soon_delivered() -> bool:
        """The first message (due in 200 ms) is delivered."""
        return cluster.client(0).status(soon["id"]).state == "delivered"

    wait_until(soon_delivered, 10)
    r = cluster.client(1).request("DELETE", f"/v1/messages/{later['id']}")
    assert r.status == 200 and r.body["state"] == "cancelled"
    st = cluster.client(0).request("GET", f"/v1/messages/{later['id']}").body
    assert st["state"] == "cancelled"
    with pytest.raises(HorologeError) as e:
        cluster.client(0).request("DELETE", f"/v1/messages/{soon['id']}")
    assert e.value.status == 409 and e.value.code == "already_delivered"
    cluster.produce(0, [{"topic": "t", "body": "x", "deliver_at": now + 60_000, "key": "k2"}])
    r = cluster.client(2).request("DELETE", "/v1/messages?topic=t&key=k2")
    assert r.status == 200 and r.body["state"] == "cancelled"
