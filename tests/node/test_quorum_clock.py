"""The quorum-bounded clock: one clock, or a minority, cannot move the cluster's time."""

from __future__ import annotations

import pytest

from horologe.node.quorum_clock import QuorumClock, quorum_ms

TRUE = 1_800_000_000_000
HOUR = 3_600_000


def test_quorum_is_the_majoritys_latest_common_instant():
    assert quorum_ms([TRUE + HOUR, TRUE, TRUE - 10], 3) == TRUE
    assert quorum_ms([TRUE - HOUR, TRUE, TRUE - 10], 3) == TRUE - 10
    assert quorum_ms([TRUE + HOUR, TRUE + HOUR, TRUE], 3) == TRUE + HOUR  # a majority says so
    assert quorum_ms([TRUE], 3) is None
    assert quorum_ms([TRUE], 1) == TRUE
    assert quorum_ms([5, 4, 3, 2, 1], 5) == 3


def _clock(own: int, peers: list[tuple[int, float]], tolerance: int = 2000) -> QuorumClock:
    return QuorumClock(lambda: own, lambda: peers, 3, tolerance)


@pytest.mark.parametrize("step", [HOUR, -HOUR])
def test_a_stepped_clock_is_held_within_the_tolerance(step):
    peers = [(TRUE - 300, 0.3), (TRUE - 100, 0.1)]
    qc = _clock(TRUE + step, peers)
    assert qc.known()
    assert abs(qc.now_ms() - TRUE) <= 2000 + 300
    assert qc.offset_ms() == pytest.approx(step, abs=500)


def test_honest_clocks_are_left_alone():
    qc = _clock(TRUE, [(TRUE - 400, 0.4), (TRUE - 200, 0.2)])
    assert qc.now_ms() == TRUE
    assert 0 <= qc.offset_ms() <= 400


def test_stale_readings_hold_time_back_and_say_nothing_of_the_offset():
    # Both peers last heard an hour ago: time may not run past them plus the tolerance.
    qc = _clock(TRUE, [(TRUE - HOUR, HOUR / 1000), (TRUE - HOUR, HOUR / 1000)])
    assert qc.now_ms() == TRUE - HOUR + 2000
    assert qc.offset_ms() is None


def test_unknown_until_a_majority_is_heard():
    qc = _clock(TRUE, [])
    assert not qc.known() and qc.now_ms() == TRUE and qc.offset_ms() is None
