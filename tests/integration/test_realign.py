"""A new master realigns against its own clock: sleeps when behind the tick, fast-forwards when ahead.

The two surviving nodes run with a test-only clock offset (HOROLOGE_TEST_CLOCK_OFFSET_MS,
honoured only with HOROLOGE_TEST_MODE=1);
the chaos suite does the same with libfaketime. Those two are a majority, so n1's true
clock is the odd one out: with the default 2 s ``clock_tolerance_ms`` n1 would be held to
their time and hand the wheel over at once (docs/cluster.md, "Clocks"; the chaos
scenarios clock_skew and clock_step_* test that). Here the tolerance is wider than the
skew, so the tick n1 leaves behind is SKEW_MS off the next master's clock.
"""

from __future__ import annotations

import signal
import time

import pytest

from .history import verify_ready_logs
from .load import wait_delivered

SKEW_MS = 10_000


def skewed(offset_ms: int) -> dict[str, str]:
    """The env that skews a node's clock by ``offset_ms`` (test mode on: refused otherwise)."""
    return {"HOROLOGE_TEST_MODE": "1", "HOROLOGE_TEST_CLOCK_OFFSET_MS": str(offset_ms)}


def _skewed_failover(make_cluster, offset_ms: int):
    """n1 (true clock) masters and takes messages; it is killed; a skewed node takes over.

    Returns the new master's log and the delivered rows (from a survivor's ready log).
    """
    skew = skewed(offset_ms)
    cluster = make_cluster(env={1: skew, 2: skew}, extra_toml=f"clock_tolerance_ms = {3 * SKEW_MS}")
    for _ in range(3):  # set-up: n1 (true clock) must be master; a handover can be undone by an election
        master = cluster.wait_connected()
        if master == 0:
            break
        cluster.client(master).release_master("n1")
    assert cluster.wait_connected() == 0
    now = int(time.time() * 1000)
    acked = {
        r["id"]: r["deliver_at"]
        for r in cluster.produce(
            0, [{"topic": "skew", "body": str(k), "deliver_at": now + 3_000 + 20 * k} for k in range(20)]
        )
    }
    cluster.signal(0, signal.SIGKILL)
    new = cluster.wait_leader([1, 2], exclude=0)
    wait_delivered(cluster, [1, 2], timeout_s=40)
    log = cluster.log(new)
    cluster.stop_all()
    verify_ready_logs(cluster, "skew", acked, among=[1, 2])  # never early by the master's clock
    with cluster.store(1) as s:
        rows = s.read_ready("skew")
    assert len(rows) == len(acked)
    return log, rows


def test_new_master_behind_the_tick_sleeps(make_cluster):
    log, rows = _skewed_failover(make_cluster, -SKEW_MS)
    assert "Sleep(until_ms=" in log
    # delivered_at is the new master's clock; true time is SKEW_MS later: it waited
    real = rows["delivered_at_ms"] + SKEW_MS
    assert (real >= rows["deliver_at_ms"] + SKEW_MS).all()


def test_new_master_ahead_of_the_tick_fast_forwards(make_cluster):
    log, rows = _skewed_failover(make_cluster, +SKEW_MS)
    assert "FastForward(" in log
    # Its clock, 10 s ahead, was past every deliver time when it took over: all of them
    # went out in the one catch-up entry of the fast-forward (one delivered_at), not one
    # by one at their 20 ms-apart times; and by its own clock none was early.
    assert len(set(rows["delivered_at_ms"].tolist())) == 1
    assert (rows["delivered_at_ms"] >= rows["deliver_at_ms"]).all()


@pytest.mark.parametrize("offset", [-SKEW_MS, SKEW_MS])
def test_status_reports_the_skewed_clock(make_cluster, offset):
    cluster = make_cluster(nodes=1, env={0: skewed(offset)})
    st = cluster.status(0)
    assert abs(st["clock_ms"] - (time.time() * 1000 + offset)) < 2_000
