"""Peers' clock readings as the keep-alives bring them, and each link's transit time.

Every keep-alive carries the sender's clock reading, its monotonic time of sending, and
an echo of the last keep-alive it had from the receiver: that one's send time, and how
long it was held before this one went out, counted from when it would have arrived had it
not waited (its ``held_s``, below: in a paused node's socket, say). From the echo the
receiver has a round trip, ``arrived - echoed send - held``, both ends on their own
monotonic clocks; half of it is one transit. Without the wait counted, a round trip
closed by a node that wakes from a pause holds the pause, and half of it, taken as a
transit, ages a reading past the sender's clock (the simulator's seed 100167: the
cluster's time 36 ms ahead). A link that became slower towards the echoing node looks
the same to it until its window forgets the quicker keep-alives; the rise is then counted
as a wait, and a reading errs late by half of it.

The smallest of the last ``SAMPLES`` halves is the link's transit: a reading arrived that
long after it was read, so it is aged by its age here plus that. The smallest, since a
delay in one direction (a busy receiver) would otherwise be counted in the other as well,
and a reading aged by more than its true age runs ahead.
A round trip outside [0, ``MAX_ROUND_TRIP_S``] (a monotonic clock that jumped, as under
libfaketime) is no sample. A keep-alive without these fields gives none either.

A reading that a link held (a blackhole healed, TCP retransmitting after a cut), or that
waited on a busy tick thread at either end, arrives late: aged from its arrival only, it
would lag the sender's clock by as long as it waited, and a master stamping by that
lagging time hands out leases that end early. ``arrived - sent`` (two monotonic clocks)
is the transit plus the clocks' fixed offset; a reading for which it exceeds the smallest
of the last ``SAMPLES`` waited that much longer, and is aged by that too. Monotonic clocks
that run at different rates skew this by their difference over the samples' span (4 s):
microseconds for real oscillators.

A monotonic clock that steps (libfaketime steps it with the wall clock) moves ``arrived -
sent`` by the step for good, not for one reading: two keep-alives in a row at the same
new level (within ``MAX_HELD_S``), sent at least ``STEP_SPAN_S`` apart, are that, and the
window starts again from them. Held keep-alives cannot look like it: released together,
each arrives as much less late as it was sent later. Without this, a step of an hour aged
every reading by an hour until the keep-alives from before it left the window (3.5 s in
which the stepped node had no fresh readings of a majority: docs/chaos.md). A link whose
delay one way rose and stays up looks the same, so the transit is measured again from
there too: with the quick round trips from before kept, each reading would be aged by
them and lag by the whole rise, not half of it as on any link slower one way (the
simulator's node services, seed 1397: a rise of 250 ms, leases that much short).

Both corrections take the window's quickest keep-alive for one that did not wait. A
window of nothing but keep-alives that waited (a node that started while its link to a
peer was cut, and then got the held ones in a burst at the heal) has no such reference,
and each of its readings would lag by its wait. So a reading is *taken* only when one of
these holds, and otherwise the last one taken stands, aged by this node's monotonic clock
(stale 1.5 s after it was read: node/quorum_clock.py):

- its keep-alive's own round trip (``arrived - echoed send - held``) is under
  ``TRUSTED_ROUND_TRIP_S``: its transit is under that, and the window's quickest
  ``arrived - sent`` is no later than its own, so its age errs late by less than that;
- or the window's two quickest keep-alives arrived within ``MAX_HELD_S`` of each other's
  lateness: a level, which keep-alives released together never make (each arrives as much
  less late as it was sent later), as on a link slow both ways.

The first keep-alive heard from a peer, which echoes nothing, gives no reading; nor is
it echoed: it may have waited on the way (behind a snapshot's chunks on a link just made)
with no other of the peer's to tell its wait by, and a hold echoed short makes the round
trip long, and a reading aged by half of it runs ahead of its sender's clock.

Pure: monotonic times are arguments. node/quorum_clock.py uses the readings.
"""

from __future__ import annotations

from typing import NamedTuple

SAMPLES = 8  # round trips the transit is taken over (4 s of keep-alives)
MAX_ROUND_TRIP_S = 0.5
MAX_HELD_S = 0.05  # two waits that differ by less are one level of ``arrived - sent``
STEP_SPAN_S = 0.2  # sent at least this far apart: not one burst of held keep-alives
TRUSTED_ROUND_TRIP_S = 0.05  # a round trip this short vouches for its keep-alive's reading


class PeerClock(NamedTuple):
    ms: int | None  # the peer's last clock reading taken (None: none yet)
    read: float  # when the peer read it, by this node's monotonic clock (s)
    arrived: float  # when the latest keep-alive arrived, by this node's monotonic clock (s)
    sent: float | None  # when the peer sent it, by the peer's monotonic clock (echoed back)
    transits: tuple[float, ...] = ()  # the last one-way transit samples (s)
    delays: tuple[float, ...] = ()  # the last ``arrived - sent`` (two monotonic clocks, s)

    def transit_s(self) -> float:
        return min(self.transits, default=0.0)

    def held_s(self) -> float:
        """How much later than the quickest recent keep-alive the latest one arrived."""
        return self.delays[-1] - min(self.delays) if self.delays else 0.0

    def age_s(self, now: float) -> float:
        """Seconds since the peer read the clock reading taken."""
        return now - self.read


def keepalive(clock_ms: int, now: float, last: PeerClock | None) -> dict:
    """The keep-alive fields for a peer whose last keep-alive here was ``last``."""
    fields: dict = {"clock_ms": clock_ms, "sent": now}
    if last is not None and last.sent is not None and len(last.delays) >= 2:
        # held here since it arrived, and as much longer as it waited to be read: the
        # first keep-alive heard has no other to tell its wait by, and is not echoed
        fields["echo"] = [last.sent, now - last.arrived + last.held_s()]
    return fields


def received(message: dict, arrived: float, last: PeerClock | None) -> PeerClock | None:
    """The peer's clock after ``message`` (a keep-alive) arrived; None if it carries no reading."""
    ms = message.get("clock_ms")
    if not isinstance(ms, int):
        return None
    sent = message.get("sent")
    sent = sent if isinstance(sent, (int, float)) else None
    transits = () if last is None else last.transits
    delays = () if last is None else last.delays
    if sent is not None:
        delay = arrived - sent
        if _stepped(last, sent, delay):
            delays, transits = delays[-1:], ()
        delays = (*delays, delay)[-SAMPLES:]
    round_trip = _round_trip(message.get("echo"), arrived)
    if round_trip is not None:
        transits = (*transits, round_trip / 2)[-SAMPLES:]
    heard = PeerClock(ms, arrived, arrived, sent, transits, delays)
    if (round_trip is not None and round_trip <= TRUSTED_ROUND_TRIP_S) or _level(delays):
        # read its transit before it arrived, and as much later as it waited on the way
        return heard._replace(read=arrived - heard.transit_s() - heard.held_s())
    if last is None:
        return heard._replace(ms=None)
    return heard._replace(ms=last.ms, read=last.read)


def _round_trip(echo: object, arrived: float) -> float | None:
    """The round trip ``echo`` gives: None without one, or outside [0, ``MAX_ROUND_TRIP_S``]."""
    numbers = isinstance(echo, (list, tuple)) and all(isinstance(x, (int, float)) for x in echo)
    if not numbers or len(echo) != 2:
        return None
    round_trip = arrived - echo[0] - echo[1]
    return round_trip if 0 <= round_trip <= MAX_ROUND_TRIP_S else None


def _level(delays: tuple[float, ...]) -> bool:
    """Whether the window's two quickest keep-alives arrived about as late as each other."""
    if len(delays) < 2:
        return False
    quickest, next_quickest = sorted(delays)[:2]
    return next_quickest - quickest <= MAX_HELD_S


def _stepped(last: PeerClock | None, sent: float, delay: float) -> bool:
    """Whether ``delay`` (``arrived - sent``) and the last one stand at one new level above
    the window's quickest, sent apart: a monotonic clock stepped at either end."""
    if last is None or last.sent is None or not last.delays or sent - last.sent < STEP_SPAN_S:
        return False
    before, quickest = last.delays[-1], min(last.delays)
    return before - quickest > MAX_HELD_S and abs(delay - before) <= MAX_HELD_S
