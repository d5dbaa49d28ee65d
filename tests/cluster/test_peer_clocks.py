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
    a_view, b_view = _exchange(9.5, b_offset=5_000.0, one_way=0.003, back=0.003, hold=0.2)
    assert a_view.ms is None  # B echoes A's keep-alives from its second on
    a_view, _ = _exchange(10.0, 5_000.0, 0.003, 0.003, 0.2, b_last=b_view, a_last=a_view)
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
            20.0 + k, 7.0, one_way=0.002, back=0.018, hold=0.1, b_last=b_last, a_last=a_last
        )
    assert a_last.transit_s() == pytest.approx(0.010)


def test_a_rise_towards_the_echoer_counts_as_its_wait_until_its_window_forgets():
    """Both ways rise from 2 to 10 ms. B cannot tell A's keep-alives coming 8 ms later than
    its quickest from a wait, and counts it into its echoes' hold: once A's window no longer
    holds a 2 ms round trip, its transit is 6 ms and a reading lags by 4 ms (late, never
    early), until B's window no longer holds the quick keep-alives and A's the round trips
    measured meanwhile."""
    a_last = b_last = None
    for k in range(3):
        a_last, b_last = _exchange(10.0 + k, 7.0, 0.002, 0.002, 0.1, b_last=b_last, a_last=a_last)
    transits = []
    for k in range(3 * SAMPLES):
        a_last, b_last = _exchange(20.0 + k, 7.0, 0.010, 0.010, 0.1, b_last=b_last, a_last=a_last)
        transits.append(round(a_last.transit_s(), 4))
    assert transits == [0.002] * 7 + [0.006] * 7 + [0.010] * (3 * SAMPLES - 14)


@pytest.mark.parametrize("jump", [3600.0, -3600.0])
def test_a_round_trip_across_a_monotonic_jump_is_no_sample_and_no_reading(jump):
    _, b_view = _exchange(10.0, 0.0, one_way=0.002, back=0.002, hold=0.1)
    a_view = received(keepalive(2000, 10.2 + jump, b_view), 10.3, None)  # B's clock jumped meanwhile
    assert a_view.transit_s() == 0.0 and a_view.ms is None


def test_a_keepalive_without_a_round_trip_gives_no_reading():
    c = received({"type": "horologe_keepalive", "clock_ms": 5}, 3.0, None)
    assert (c.ms, c.sent, c.transit_s()) == (None, None, 0.0)
    assert keepalive(7, 4.0, c) == {"clock_ms": 7, "sent": 4.0}  # nothing to echo
    assert received({"clock_ms": "x"}, 3.0, None) is None


class Link:
    """Keep-alives both ways between A and B, each echoing the other's last. Times are true
    ones; B's monotonic clock is ``offset`` s off them, A's ``a_clock`` s at the moment."""

    def __init__(self, offset: float) -> None:
        self.offset = offset
        self.a_view = self.b_view = None  # A's view of B, B's of A

    def to_b(self, sent: float, transit: float, a_clock: float = 0.0) -> None:
        msg = keepalive(0, sent + a_clock, self.a_view)
        self.b_view = received(msg, sent + transit + self.offset, self.b_view)

    def to_a(self, ms: int, sent: float, transit: float, a_clock: float = 0.0):
        """B sends ``ms`` at ``sent``, and it arrives ``transit`` later: A's view of B."""
        msg = keepalive(ms, sent + self.offset, self.b_view)
        self.a_view = received(msg, sent + transit + a_clock, self.a_view)
        return self.a_view


def test_a_reading_that_waited_on_the_way_is_aged_by_the_wait():
    """A keep-alive held in a cut link arrives in a burst once it heals: aged from its
    arrival only it would lag the sender's clock by the hold (a lease stamped by it ends
    early)."""
    link = Link(5_000.0)
    for k in range(4):  # keep-alives 2 ms on the way, each way
        link.to_b(10.0 + 0.5 * k, 0.002)
        last = link.to_a(1000 + 500 * k, 10.25 + 0.5 * k, 0.002)
    assert last.age_s(last.arrived) == pytest.approx(0.002)
    link.to_b(12.0, 0.002)
    held = link.to_a(3000, 12.25, 0.002 + 0.3)  # held 300 ms
    assert held.ms == 3000 and held.held_s() == pytest.approx(0.3)
    assert held.age_s(held.arrived + 0.1) == pytest.approx(0.402)
    link.to_b(12.5, 0.002)
    on_time = link.to_a(3500, 12.75, 0.002)
    assert on_time.age_s(on_time.arrived) == pytest.approx(0.002)


def test_a_window_of_held_keepalives_alone_gives_no_reading():
    """A node started while its link to a peer was cut: the first keep-alives it hears,
    released together at the heal, all waited, and there is no quick one to measure their
    wait against. Taken, the last lagged B's clock by 375 ms, and a master stamped leases
    that ended that much early (simulator, ``--service --power-loss --membership``, seed
    409). The first quick keep-alive after gives the reading."""
    link = Link(5_000.0)
    link.to_b(10.0, 0.002)  # A's keep-alive reaches B; B's answers wait in the cut link
    first = link.to_a(1000, 10.1, 0.9)
    link.to_b(10.5, 0.002)
    second = link.to_a(1500, 10.6, 0.4)  # released with the first: round trip 0.4 s
    assert first.ms is None and second.ms is None
    link.to_b(11.0, 0.002)
    quick = link.to_a(2000, 11.1, 0.002)
    assert quick.ms == 2000 and quick.age_s(quick.arrived) == pytest.approx(0.002)


def test_a_monotonic_clock_that_stepped_ages_one_keepalive_by_the_step_not_the_window():
    """libfaketime steps the monotonic clock with the wall clock. ``arrived - sent`` then
    moves by the step for good: the second keep-alive at the new level starts the window
    again, and its reading is fresh (before, the step aged readings for 3.5 s)."""
    link, ages = Link(5_000.0), []
    link.to_b(9.5, 0.002)  # B echoes A's keep-alives from its second on
    for k in range(8):
        link.to_b(10.0 + 0.5 * k, 0.002, a_clock=3600.0 if k >= 5 else 0.0)
        last = link.to_a(1000 + 500 * k, 10.25 + 0.5 * k, 0.002, a_clock=3600.0 if k >= 4 else 0.0)
        ages.append(round(last.age_s(last.arrived), 3))
    assert ages == [0.002, 0.002, 0.002, 0.002, 3600.002, 0.002, 0.002, 0.002]


def test_held_keepalives_released_together_are_not_a_step():
    """A link held three keep-alives sent 0.5 s apart and let them go at once: each is
    aged by its own wait, as before; none starts the window again."""
    link = Link(5_000.0)
    for k in range(4):
        link.to_b(10.0 + 0.5 * k, 0.002)
        link.to_a(1000 + 500 * k, 10.25 + 0.5 * k, 0.002)
    released, ages = 13.75 + 0.002, []
    for k in range(4, 7):
        link.to_b(10.0 + 0.5 * k, 0.002)
        held = link.to_a(1000 + 500 * k, 10.25 + 0.5 * k, released - (10.25 + 0.5 * k))
        ages.append(round(held.age_s(released), 3))
    assert ages == [1.502, 1.002, 0.502]


def test_a_link_slow_both_ways_gives_readings_from_its_second_keepalive():
    """100 ms each way: no round trip vouches for a reading, but two keep-alives as late as
    each other make a level, and each reading is aged by the transit."""
    link, taken = Link(5_000.0), []
    for k in range(3):
        link.to_b(10.0 + 0.5 * k, 0.1)
        last = link.to_a(1000 + 500 * k, 10.25 + 0.5 * k, 0.1)
        taken.append(last.ms)
    assert taken == [None, 1500, 2000]
    assert last.age_s(last.arrived) == pytest.approx(0.1)


def test_a_delay_that_rose_one_way_and_stays_lags_by_half_of_it():
    """B -> A rises from 2 to 252 ms and stays: two keep-alives at the new level start the
    window again, as a step would, and the transit is measured again from there, so a
    reading errs by half the rise, as on any link slower one way (kept, the quick round
    trips from before aged it by 2 ms, and it lagged by the whole rise)."""
    link = Link(5_000.0)
    for k in range(6):
        link.to_b(10.0 + 0.5 * k, 0.002)
        last = link.to_a(1000 + 500 * k, 10.25 + 0.5 * k, 0.002 if k < 4 else 0.252)
    assert last.age_s(last.arrived) == pytest.approx(0.127)


def test_a_keepalive_that_waited_for_its_echoer_does_not_age_a_reading_past_its_age():
    """B was paused (SIGSTOP, a stalled VM) while A's keep-alive waited in its socket, and
    echoed it as it woke. That round trip holds the wait; taken as two transits, it would
    age B's reading past B's clock, run the cluster's time ahead and hand messages out
    early. A's monotonic clock had stepped, so this round trip was the only one its window
    held (simulator, ``--service --power-loss --membership --timed-waits --hold``, seed
    100167: 36 ms early). B counts the wait it saw into its echo's hold."""
    link, stepped = Link(5_000.0), 3600.0
    for k in range(5):
        link.to_b(10.0 + 0.5 * k, 0.002, a_clock=stepped if k >= 4 else 0.0)
        link.to_a(1000 + 500 * k, 10.25 + 0.5 * k, 0.002, a_clock=stepped if k >= 4 else 0.0)
    link.to_b(12.5, 0.002 + 0.073, a_clock=stepped)  # read by B 73 ms after it came
    woken = link.to_a(3500, 12.575, 0.002, a_clock=stepped)  # B's, as it woke
    assert woken.ms == 3500
    assert woken.age_s(woken.arrived) == pytest.approx(0.002)


def test_the_first_keepalive_heard_from_a_peer_is_not_echoed():
    """A's first keep-alive to B, a member being added, waited 44 ms behind the snapshot
    chunks on their new link; B had no other of A's to tell that wait by, and echoed it
    as held for none. A took the round trip for two transits of 23 ms, aged B's reading
    21 ms past B's clock, and, with its own clock an hour ahead, ran the cluster's time
    that far ahead: a push handed out 26 ms early (simulator, every option, seed
    1170143). B echoes a keep-alive only once it has two to compare."""
    link = Link(5_000.0)
    link.to_b(10.0, 0.044)
    first = link.to_a(1000, 10.4, 0.0015)
    assert first.ms is None  # nothing echoed: no round trip, no reading
    link.to_b(10.5, 0.0015)
    second = link.to_a(1500, 10.9, 0.0015)
    assert second.ms == 1500 and second.age_s(second.arrived) == pytest.approx(0.0015)
