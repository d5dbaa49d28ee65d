"""A new master realigns against its own clock: sleeps when behind the tick, fast-forwards when ahead.

The two surviving nodes run with a test-only clock offset (HOROLOGE_TEST_CLOCK_OFFSET_MS);
the chaos suite does the same with libfaketime.
"""

from __future__ import annotations

import signal
import time

import pytest

from horologe.http_client import call

from .cluster import ADMIN
from .history import verify_ready_logs
from .load import wait_delivered

SKEW_MS = 10_000


def _skewed_failover(make_cluster, offset_ms: int):
    skew = {"HOROLOGE_TEST_CLOCK_OFFSET_MS": str(offset_ms)}
    cluster = make_cluster(env={1: skew, 2: skew})
    master = cluster.wait_connected()
    if master != 0:
        call("POST", f"{cluster.url(master)}/admin/release-master", ADMIN, {"to": "n1"})
        assert cluster.wait_leader(exclude=master) == 0
    now = int(time.time() * 1000)
    acked = {
        r["id"]: r["deliver_at"]
        for r in cluster.produce(
            0, [{"topic": "skew", "body": str(k), "deliver_at": now + 3_000 + 20 * k} for k in range(20)]
        )
    }
    t0 = time.monotonic()
    cluster.signal(0, signal.SIGKILL)
    new = cluster.wait_leader([1, 2], exclude=0)
    wait_delivered(cluster, [1, 2], timeout_s=40)
    took = time.monotonic() - t0
    log = cluster.log(new)
    cluster.stop_all()
    verify_ready_logs(cluster, "skew", acked, among=[1, 2])  # never early by the master's clock
    return took, log


def test_new_master_behind_the_tick_sleeps(make_cluster):
    took, log = _skewed_failover(make_cluster, -SKEW_MS)
    assert "Sleep(until_ms=" in log
    # due 3 s after the kill by n1's clock, 10 s later by the new master's
    assert took >= 3 + SKEW_MS / 1000 - 1.0, took


def test_new_master_ahead_of_the_tick_fast_forwards(make_cluster):
    took, log = _skewed_failover(make_cluster, +SKEW_MS)
    assert "FastForward(" in log
    # its clock is past every deliver time already: out at once, not 3 s later
    assert took < 3.0, took


@pytest.mark.parametrize("offset", [-SKEW_MS, SKEW_MS])
def test_status_reports_the_skewed_clock(make_cluster, offset):
    cluster = make_cluster(nodes=1, env={0: {"HOROLOGE_TEST_CLOCK_OFFSET_MS": str(offset)}})
    st = cluster.status(0)
    assert abs(st["clock_ms"] - (time.time() * 1000 + offset)) < 2_000
