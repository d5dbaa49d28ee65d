"""Lateness policies on a real 3-node cluster: a message that falls due later than its
max_lateness is dropped or dead-lettered as asked; the API says how late each one was."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from horologe.cli import main
from horologe.client import AlreadyDeliveredError, InvalidRequestError
from testkit.process_cluster import CLIENT
from testkit.waiting import wait_until

# The master stamps entries by quorum time (node/quorum_clock.py), which trails the true
# time by its error: peers' readings truncated to the ms, aged by a truncated age and a
# transit of half the smallest round trip. On one machine that is a few ms: enough that a
# message due a minute before the client read its clock is stamped a few ms less late.
QUORUM_LAG_MS = 50


def test_messages_past_their_allowance_follow_their_policy(cluster):
    c = cluster.client(0)
    c.produce("late", "first")
    first = c.pull("late", "g", max=1, wait_ms=5_000)
    c.ack("late", "g", first.receipts())  # g has read the topic: a late dlq message reaches it
    now = int(time.time() * 1000)
    # due a minute ago: far past a 5 s allowance, as after a long outage
    dropped = c.produce("late", "d", deliver_at=now - 60_000, max_lateness="5s", on_late="drop")
    dead = c.produce("late", "q", deliver_at=now - 60_000, max_lateness=5_000, on_late="dlq")
    anyway = c.produce("late", "a", deliver_at=now - 60_000, max_lateness="5s")
    fresh = c.produce("late", "f", deliver_at=now + 500, max_lateness="10s", on_late="drop")
    got = {}
    deadline = time.monotonic() + 20
    while len(got) < 2 and time.monotonic() < deadline:
        batch = c.pull("late", "g", max=10, wait_ms=500)
        got.update({m.body: m for m in batch})
        if batch:
            c.ack("late", "g", batch.receipts())
    assert sorted(got) == [b"a", b"f"]
    (dlq,) = c.pull("%DLQ%g", "g", max=10, wait_ms=2_000)
    assert (dlq.id, dlq.body) == (dead.id, b"q")
    # how late, by the master's clock when each was produced: between the minute the
    # client meant and the time the client has now
    late = range(60_000 - QUORUM_LAG_MS, int(time.time() * 1000) - now + 60_000 + 1)
    st = {m.id: c.status(m.id) for m in (dropped, dead, anyway, fresh)}
    assert st[dropped.id].state == "dropped" and st[dropped.id].late_by_ms in late
    assert st[dead.id].state == "dead_lettered" and st[dead.id].late_by_ms in late
    assert st[anyway.id].state == "delivered" and st[anyway.id].late_by_ms in late
    assert st[fresh.id].state == "delivered" and 0 <= st[fresh.id].late_by_ms <= 10_000
    with pytest.raises(AlreadyDeliveredError):
        c.cancel(dropped.id)
    counters = cluster.status(0)["counters"]
    assert counters["late_dropped"] == 1 and counters["late_dead_lettered"] == 1
    wait_until(lambda: all(cluster.status(i)["counters"] == counters for i in cluster.indexes), 10)


BAD_LATENESS = [
    ({"on_late": "drop"}, "max_lateness"),
    ({"on_late": "later", "max_lateness": 5}, "on_late"),
    ({"max_lateness": "soon"}, "max_lateness"),
    ({"max_lateness": -1}, "max_lateness"),
    ({"headers": {"x-horologe-on-late": "drop"}}, "headers"),
]


def test_bad_lateness_fields_are_refused_naming_the_field_and_nothing_is_stored(cluster):
    master = cluster.wait_leader()
    before = cluster.status(master)["counters"]["stored"]
    named = []
    for fields, _ in BAD_LATENESS:
        with pytest.raises(InvalidRequestError) as e:
            cluster.client(0).request("POST", "/v1/messages", {"topic": "late", "body": "x", **fields})
        named.append(e.value.field)
    assert named == [field for _, field in BAD_LATENESS]
    assert cluster.status(master)["counters"]["stored"] == before


def test_the_cli_sets_a_policy(cluster):
    args = ["produce", "--url", cluster.url(0), "--token", CLIENT, "--topic", "late", "--body", "x"]
    shown = CliRunner().invoke(main, [*args, "--at", "1000", "--max-lateness", "1s", "--on-late", "drop"])
    assert shown.exit_code == 0, shown.output
    assert '"id"' in shown.output
    wait_until(lambda: cluster.client(0).status(shown.output.split('"id": "')[1][:16]).state == "dropped", 10)
