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
    return QuorumClock(lambda: own, lambda: peers, lambda: 3, tolerance)


# A reading arrives as (ms, seconds since it arrived); an honest peer's reading taken at
# true time TRUE - 1000 * age is TRUE once aged forward by its age.
def _honest(age_s: float) -> tuple[int, float]:
    return (TRUE - int(age_s * 1000), age_s)


def test_stale_readings_count_for_nothing():
    # Both peers last heard an hour ago, and never fresh since this clock was made.
    qc = _clock(TRUE, [(TRUE - HOUR, HOUR / 1000), (TRUE - HOUR, HOUR / 1000)])
    assert not qc.known() and qc.now_ms() == TRUE and qc.offset_ms() is None


def test_when_readings_go_stale_time_holds_at_the_last_quorum_time():
    own = [TRUE]
    peers = [_honest(0.3), _honest(0.1)]
    qc = QuorumClock(lambda: own[0], lambda: peers, lambda: 3, 2000)
    assert qc.now_ms() == TRUE and qc.fresh()
    own[0] = TRUE + 10_000  # 10 s on, nothing heard since: held, not aged, not own
    peers[:] = [(ms, age + 10) for ms, age in peers]
    assert qc.known() and qc.now_ms() == TRUE and qc.offset_ms() is None
    assert not qc.fresh()  # 10 s behind the true time: a master serves nothing by it
    own[0] = TRUE - 5_000  # and within the tolerance below it
    assert qc.now_ms() == TRUE - 2000


def test_unknown_until_a_majority_is_heard():
    qc = _clock(TRUE, [])
    assert not qc.known() and qc.now_ms() == TRUE and qc.offset_ms() is None


def test_a_clock_an_hour_ahead_runs_at_the_honest_majoritys_time():
    # (a) Two honest, fresh peers: no tolerance's worth early, a few ms at most.
    qc = _clock(TRUE + HOUR, [_honest(0.3), _honest(0.1)])
    assert TRUE - 5 <= qc.now_ms() <= TRUE + 5
    assert qc.offset_ms() == pytest.approx(HOUR, abs=5)


def test_a_dead_peers_stale_reading_an_hour_ahead_counts_for_nothing():
    # (b) P1's clock was +1 h, then P1 died: its last reading, 60 s old, says +1 h.
    stale_ahead = (TRUE + HOUR - 60_000, 60.0)
    # The master's clock now steps +1 h too; P2 is honest and fresh.
    master = _clock(TRUE + HOUR, [stale_ahead, _honest(0.2)])
    assert TRUE - 5 <= master.now_ms() <= TRUE + 5
    assert master.offset_ms() == pytest.approx(HOUR, abs=5)  # so it hands over
    # P2, handed the wheel: the stepped master's fresh reading and P1's stale one.
    p2 = _clock(TRUE, [stale_ahead, (TRUE + HOUR - 200, 0.2)])
    assert TRUE - 5 <= p2.now_ms() <= TRUE + 5
    assert p2.offset_ms() == pytest.approx(0, abs=5)


@pytest.mark.parametrize("own", [TRUE, TRUE + 3, TRUE - 3])
@pytest.mark.parametrize("ages", [(0.0, 0.0), (0.4, 0.2), (1.2, 1.4)])
def test_a_healthy_cluster_runs_on_time(own, ages):
    # (c) Readings up to fresh_s old, aged forward: no lateness added, none early beyond
    # this clock's own few ms.
    qc = _clock(own, [_honest(ages[0]), _honest(ages[1])])
    assert TRUE - 3 <= qc.now_ms() <= max(own, TRUE)
    assert qc.now_ms() >= min(own, TRUE)


def test_a_clock_an_hour_behind_is_never_early_and_hands_over():
    # (d) Not early by the true clock; at most the tolerance behind it (so a relative
    # delay is resolved at most that early), and the offset is seen.
    qc = _clock(TRUE - HOUR, [_honest(0.3), _honest(0.1)])
    assert TRUE - 2000 <= qc.now_ms() <= TRUE
    assert qc.offset_ms() == pytest.approx(-HOUR, abs=5)


def test_a_step_that_moves_the_monotonic_clock_too_holds_time_until_fresh_readings_come():
    # libfaketime steps a process's monotonic clock with its wall clock: every reading
    # looks an hour old at once. Time holds at the last quorum time, not the own clock.
    own = [TRUE]
    peers = [_honest(0.3), _honest(0.1)]
    qc = QuorumClock(lambda: own[0], lambda: peers, lambda: 3, 2000)
    assert qc.now_ms() == TRUE
    own[0] = TRUE + 500 + HOUR  # 500 ms later, an hour ahead, readings an hour older
    peers[:] = [(ms, age + 0.5 + HOUR / 1000) for ms, age in peers]
    assert qc.known()
    assert TRUE - 5 <= qc.now_ms() <= TRUE + 500
    assert qc.offset_ms() is None
    peers[0] = (TRUE + 500, 0.0)  # the next keep-alive
    assert TRUE + 495 <= qc.now_ms() <= TRUE + 505
    assert qc.offset_ms() == pytest.approx(HOUR, abs=5)


def test_a_step_back_that_moves_the_monotonic_clock_too_is_never_early_and_seen_at_once():
    # The monotonic clock stepped back an hour: the readings in hand arrived "in the
    # future" (negative ages). Their age unknown, they count as received, not aged: late
    # by that age, never early, and the offset shows at once (the stepped node's timers
    # lie an hour ahead, so it may not look again soon).
    own = [TRUE]
    peers = [_honest(0.3), _honest(0.1)]
    qc = QuorumClock(lambda: own[0], lambda: peers, lambda: 3, 2000)
    assert qc.now_ms() == TRUE
    own[0] = TRUE + 500 - HOUR
    peers[:] = [(ms, age + 0.5 - HOUR / 1000) for ms, age in peers]
    assert TRUE - 300 - 2000 <= qc.now_ms() <= TRUE + 500
    assert qc.offset_ms() == pytest.approx(-HOUR, abs=1000)
    peers[:] = [(TRUE + 500, 0.0), (TRUE + 500, 0.0)]  # the next keep-alives
    assert TRUE + 500 - 2000 <= qc.now_ms() <= TRUE + 500
