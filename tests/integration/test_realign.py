"""A new master realigns against its own clock: sleeps when behind the tick, fast-forwards when ahead.

Skewed nodes run with a test-only clock offset (HOROLOGE_TEST_CLOCK_OFFSET_MS, honoured
only with HOROLOGE_TEST_MODE=1); the chaos suite does the same with libfaketime. A
master's clock never runs ahead of quorum time (docs/cluster.md, "Clocks"), so:

* ahead: n2 and n3 run SKEW_MS ahead, a majority; n1 (true clock) leads by its own
  clock, which is behind theirs, and the next master finds the tick SKEW_MS behind its own.
* behind: only n3 runs SKEW_MS behind, a minority; n1 leads by the true clock and hands
  the wheel to n3, which, its clock within the tolerance of quorum time, runs by it and
  finds the tick SKEW_MS ahead. (Killing n1 instead would leave n2's reading and n3's,
  and the quorum time of two is the earlier: n2, were it elected, would run SKEW_MS
  behind too, but only once n1's last reading is too old to count, 1.5 s on.)

The tolerance is wider than the skew, so no node hands the wheel over for its clock.
"""

from __future__ import annotations

import re
import signal
import time
from dataclasses import dataclass

import numpy as np
import pytest

from horologe.node.config import NodeConfig
from testkit.waiting import wait_until

from .history import verify_ready_logs
from .load import wait_delivered

SKEW_MS = 10_000
FIRE_LEAD_MS = NodeConfig.__dataclass_fields__["fire_lead_ms"].default  # the nodes' default


def skewed(offset_ms: int) -> dict[str, str]:
    """The env that skews a node's clock by ``offset_ms`` (test mode on: refused otherwise)."""
    return {"HOROLOGE_TEST_MODE": "1", "HOROLOGE_TEST_CLOCK_OFFSET_MS": str(offset_ms)}


@dataclass
class Failover:
    log: str  # the new master's log
    rows: np.ndarray  # the delivered rows, from a survivor's ready log
    acked: dict[str, int]  # id -> deliver_at
    left_ms: int  # n1's committed watermark (its true clock) read just before the kill or handover
    done_ms: int  # true time, by this test's clock, once everything was delivered

    def plan(self, kind: str) -> dict[str, int]:
        """The fields of the new master's last realign plan, which must be of ``kind``."""
        plans = re.findall(r"leads the wheel from .*?: (\w+)\(([^)]*)\)", self.log)
        assert plans and plans[-1][0] == kind, f"the new master's last realign plans: {plans[-2:]}"
        return {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", plans[-1][1])}


def _skewed_failover(
    make_cluster, offset_ms: int, nodes: tuple[int, ...], hand_to: int | None = None
) -> Failover:
    """n1 (true clock) masters and takes messages, ``nodes`` skewed by ``offset_ms``; it
    is killed and a survivor takes over, or it hands the wheel to node ``hand_to``."""
    cluster = make_cluster(
        env={i: skewed(offset_ms) for i in nodes}, extra_toml=f"clock_tolerance_ms = {3 * SKEW_MS}"
    )
    for _ in range(3):  # set-up: n1 (true clock) must be master; a handover can be undone by an election
        master = cluster.wait_connected()
        if master == 0:
            break
        cluster.client(master).release_master("n1")
    assert cluster.wait_connected() == 0

    def n1_leads_from_its_own_clock() -> bool:
        """n1's watermark follows its own clock: past one a skewed master left ahead of
        it, and caught up from one left behind it."""
        st = cluster.status(0)
        return st["clock_ms"] - SKEW_MS / 2 < st["wheel"]["ms"] <= st["clock_ms"]

    # A skewed master that led before n1 left the watermark up to SKEW_MS off true time:
    # ahead of it, n1 would sleep and the messages below would be behind the watermark,
    # delivered on arrival rather than by the realign this test is about; behind it (a
    # master SKEW_MS slow led first), the watermark read below would be SKEW_MS old, and
    # a new master SKEW_MS slow would fast-forward from it instead of sleeping.
    wait_until(n1_leads_from_its_own_clock, 2 * SKEW_MS / 1000)
    now = int(time.time() * 1000)
    acked = {
        r["id"]: r["deliver_at"]
        for r in cluster.produce(
            0, [{"topic": "skew", "body": str(k), "deliver_at": now + 3_000 + 20 * k} for k in range(20)]
        )
    }
    left_ms = cluster.status(0)["wheel"]["ms"]  # the watermark only grows until the kill or handover
    if hand_to is None:
        cluster.signal(0, signal.SIGKILL)
    else:
        cluster.client(0).release_master(f"n{hand_to + 1}")
    new = cluster.wait_leader([1, 2], exclude=0)
    wait_delivered(cluster, [1, 2], timeout_s=40, at_least=len(acked))
    done_ms = int(time.time() * 1000)
    log = cluster.log(new)
    cluster.stop_all()
    verify_ready_logs(cluster, "skew", acked, among=[1, 2])  # never early by the master's clock
    with cluster.store(1) as s:
        rows = s.read_ready("skew")
    assert len(rows) == len(acked)
    return Failover(log, rows, acked, left_ms, done_ms)


def test_new_master_behind_the_tick_sleeps(make_cluster):
    f = _skewed_failover(make_cluster, -SKEW_MS, (2,), hand_to=2)
    # It waits for the watermark n1 committed by the true clock, not for its own reading.
    assert f.plan("Sleep")["until_ms"] >= f.left_ms
    # Its clock runs SKEW_MS behind, so in true time (this test's clock, which the
    # recorded delivered_at, the new master's clock, cannot show) the messages went out
    # SKEW_MS after they were due: it held them back until its own clock got there, less
    # the fire lead (the ready log, where wait_delivered looks, gets them that early; a
    # pull hands them out only once due).
    assert f.done_ms >= max(f.acked.values()) + SKEW_MS - FIRE_LEAD_MS


def test_new_master_ahead_of_the_tick_fast_forwards(make_cluster):
    f = _skewed_failover(make_cluster, +SKEW_MS, (1, 2))
    ff = f.plan("FastForward")
    # From the watermark n1 committed, to its own clock: SKEW_MS ahead of the true time
    # of the kill, so past every deliver time.
    assert ff["from_ms"] >= f.left_ms
    assert ff["to_ms"] >= ff["from_ms"] + SKEW_MS and ff["to_ms"] > max(f.acked.values())
    # All of them went out in the one catch-up entry of the fast-forward (one
    # delivered_at, at or after the plan's end), not one by one at their 20 ms-apart times.
    # The plan runs on the wheel's time, the clock plus the fire lead; the entry is
    # stamped with the clock.
    assert len(set(f.rows["delivered_at_ms"].tolist())) == 1
    assert int(f.rows["delivered_at_ms"][0]) >= ff["to_ms"] - FIRE_LEAD_MS


@pytest.mark.parametrize("offset", [-SKEW_MS, SKEW_MS])
def test_status_reports_the_skewed_clock(make_cluster, offset):
    cluster = make_cluster(nodes=1, env={0: skewed(offset)})
    st = cluster.status(0)
    assert abs(st["clock_ms"] - (time.time() * 1000 + offset)) < 2_000
