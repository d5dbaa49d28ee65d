"""The clock of the time a node's tick thread ran through (cluster/raft/awake_clock.py)."""

from __future__ import annotations

import random

import pytest

from horologe.cluster.raft.awake_clock import AwakeClock


def test_a_stop_counts_one_step_and_running_counts_in_full():
    clock = AwakeClock(100.0, 0.1)
    assert clock.read(100.0) == 100.0
    for k in range(1, 11):  # ticks 50 ms apart: the monotonic time, in full
        clock.tick(100.0 + 0.05 * k)
    assert clock.read(100.5) == pytest.approx(100.5)
    assert clock.read(105.0) == pytest.approx(100.6)  # stopped 4.5 s: one step
    clock.tick(105.0)
    assert clock.read(105.05) == pytest.approx(100.65)
    assert clock.read(104.0) == pytest.approx(100.6)  # a reading from before the tick


def test_it_never_runs_ahead_of_the_monotonic_clock():
    """What the read lease relies on: a follower withholds its vote for at least the
    election timeout of monotonic time."""
    rng = random.Random(7)
    now = 10.0
    clock = AwakeClock(now, 0.1)
    readings = [(now, clock.read(now))]
    for _ in range(2_000):
        now += rng.choice((0.001, 0.02, 0.05, 0.3, 2.0))
        if rng.random() < 0.7:
            clock.tick(now)
        readings.append((now, clock.read(now)))
    for _ in range(2_000):  # between any two readings, no more than the monotonic time passed
        (t1, a1), (t2, a2) = sorted(rng.sample(readings, 2))
        assert 0 <= a2 - a1 <= t2 - t1 + 1e-9
