"""Keep-alive clock readings: each aged by its time since arrival plus the link's transit."""

from __future__ import annotations

import pytest

from horologe.cluster.raft.peer_clocks import SAMPLES, keepalive, received


def _exchange(
    a_send: float, b_offset: float, one_way: float, back: float, hold: float, b_last=None, a_last=None
):
    """A keep-alive A -> B, held ``hold`` s at B, then B -> A. Monotonic clocks: A's, and
    B's ``b_offset`` off it. Returns (A's view of B, B's view of A)."""
    to_b = keepalive(1000, a_send, a_last)
    b_view = received(to_b, a_send + one_way + b_offset, b_last)
    b_send = a_send + one_way + hold + b_offset
    to_a = keepalive(2000, b_send, b_view)
    a_view = received(to_a, a_send + one_way + hold + back, a_last)
    return a_view, b_view


def test_the_transit_is_half_the_round_trip_less_the_hold():
    a_view, _ = _exchange(10.0, b_offset=5_000.0, one_way=0.003, back=0.003, hold=0.2)
    assert a_view.transit_s() == pytest.approx(0.003)
    assert a_view.age_s(a_view.arrived + 0.1) == pytest.approx(0.103)


def test_the_smallest_recent_half_round_trip_counts():
    a_last = b_last = None
    for k, back in enumerate([0.050, 0.002, 0.030]):  # one quick round trip among slow ones
        a_last, b_last = _exchange(
            10.0 + k, 7.0, one_way=0.002, back=back, hold=0.1, b_last=b_last, a_last=a_last
        )
    assert a_last.transit_s() == pytest.approx(0.002)
    for k in range(SAMPLES):  # it ages out
        a_last, b_last = _exchange(
            20.0 + k, 7.0, one_way=0.010, back=0.010, hold=0.1, b_last=b_last, a_last=a_last
        )
    assert a_last.transit_s() == pytest.approx(0.010)


@pytest.mark.parametrize("jump", [3600.0, -3600.0])
def test_a_round_trip_across_a_monotonic_jump_is_no_sample(jump):
    _, b_view = _exchange(10.0, 0.0, one_way=0.002, back=0.002, hold=0.1)
    a_view = received(keepalive(2000, 10.2 + jump, b_view), 10.3, None)  # B's clock jumped meanwhile
    assert a_view.transit_s() == 0.0 and a_view.ms == 2000


def test_a_keepalive_without_the_new_fields_is_a_reading_without_transit():
    c = received({"type": "horologe_keepalive", "clock_ms": 5}, 3.0, None)
    assert (c.ms, c.sent, c.transit_s(), c.age_s(3.5)) == (5, None, 0.0, 0.5)
    assert keepalive(7, 4.0, c) == {"clock_ms": 7, "sent": 4.0}  # nothing to echo
    assert received({"clock_ms": "x"}, 3.0, None) is None


def test_a_reading_that_waited_on_the_way_is_aged_by_the_wait():
    """A keep-alive held in a cut link arrives in a burst once it heals: aged from its
    arrival only it would lag the sender's clock by the hold (a lease stamped by it ends
    early)."""
    b_offset = 5_000.0  # B's monotonic clock, off A's
    last = None
    for k in range(4):  # B hears A's keep-alives, each 2 ms on the way
        last = received(
            keepalive(1000 + 500 * k, 10.0 + 0.5 * k, None), 10.0 + 0.5 * k + 0.002 + b_offset, last
        )
    assert last.age_s(last.arrived) == pytest.approx(0.0)
    held = received(keepalive(3000, 12.0, None), 12.0 + 0.002 + 0.3 + b_offset, last)  # held 300 ms
    assert held.held_s() == pytest.approx(0.3)
    assert held.age_s(held.arrived + 0.1) == pytest.approx(0.4)
    on_time = received(keepalive(3500, 12.5, None), 12.5 + 0.002 + b_offset, held)
    assert on_time.age_s(on_time.arrived) == pytest.approx(0.0)


def test_a_monotonic_clock_that_stepped_ages_one_keepalive_by_the_step_not_the_window():
    """libfaketime steps the monotonic clock with the wall clock. ``arrived - sent`` then
    moves by the step for good: the second keep-alive at the new level starts the window
    again, and its reading is fresh (before, the step aged readings for 3.5 s)."""
    last, ages = None, []
    for k in range(8):
        step = 3600.0 if k >= 4 else 0.0  # this node's monotonic clock steps an hour
        arrived = 5_000.0 + 0.5 * k + 0.002 + step
        last = received(keepalive(1000 + 500 * k, 10.0 + 0.5 * k, None), arrived, last)
        ages.append(round(last.age_s(last.arrived), 3))
    assert ages == [0.0, 0.0, 0.0, 0.0, 3600.0, 0.0, 0.0, 0.0]


def test_held_keepalives_released_together_are_not_a_step():
    """A link held three keep-alives sent 0.5 s apart and let them go at once: each is
    aged by its own wait, as before; none starts the window again."""
    last = None
    for k in range(4):
        last = received(keepalive(1000 + 500 * k, 10.0 + 0.5 * k, None), 5_010.0 + 0.5 * k + 0.002, last)
    released = 5_013.5 + 0.002
    ages = []
    for k in range(4, 7):
        last = received(keepalive(1000 + 500 * k, 10.0 + 0.5 * k, None), released, last)
        ages.append(round(last.age_s(released), 3))
    assert ages == [1.5, 1.0, 0.5]
