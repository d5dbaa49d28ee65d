"""Holding messages pulled ahead of their time until the master's clock reaches it.

``consume`` pulls with ``ahead_ms``: the master may hand out a message it has already
fired (its wheel runs ``fire_lead_ms`` ahead) up to that long before its ``deliver_at``,
so the pull's round trip is over by then. The subscription hands each message to the
application only once the master's clock has reached its ``deliver_at``, as seen from
here: never before, by the master's clock, and early only by what this estimate gets
wrong (below).

The estimate: each pull answer carries ``clock_ms``, the master's clock as it answered
(after it leased the batch). Read here at local time ``local_ms``, ``clock_ms - local_ms`` is the master's
lead over the local clock less the answer's transit time, so never more than the true
lead. The largest of the last ``WINDOW`` answers is the tightest such bound; a message
is released at local time ``deliver_at - offset``. Local time is the caller's: the
subscriptions use the monotonic clock (horologe/client/consuming.py), so a step of the
local wall clock releases nothing early. Answers without ``clock_ms`` (a node
that does not send it, so hands nothing out ahead) give no estimate, and their messages
are released at once. After a failover the window still holds the old master's answers
for a few pulls: the clocks of two masters differ by what the cluster's clock checks
allow (``clock_tolerance_ms``), ordinarily a millisecond or two under NTP.

Pure: local times are arguments.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from operator import attrgetter

WINDOW = 256  # answers the offset is taken over (seconds of pulls under a steady flow)
_DELIVER_AT = attrgetter("deliver_at")


class MasterClock:
    """How far the master's clock runs ahead of this one (ms, negative: behind)."""

    def __init__(self) -> None:
        self._estimates: deque[float] = deque(maxlen=WINDOW)
        self.offset: float | None = None  # None until an answer carried the master's clock

    def observe(self, clock_ms: int | None, local_ms: float) -> None:
        """An answer stamped ``clock_ms`` by the master arrived at ``local_ms``."""
        if clock_ms is None:
            return
        self._estimates.append(clock_ms - local_ms)
        self.offset = max(self._estimates)

    def release_at(self, deliver_at: int) -> float:
        """The local time (ms) at which the master's clock reaches ``deliver_at``; minus
        infinity without an estimate (nothing was handed out ahead)."""
        offset = self.offset
        return float("-inf") if offset is None else deliver_at - offset


def by_time(messages: Sequence) -> list:
    """A pulled batch in deliver order (stable): the order it is released in."""
    return sorted(messages, key=_DELIVER_AT)


def released(clock: MasterClock, pending: Sequence, local_ms: float) -> int:
    """How many of ``pending`` (in deliver order) may be handed over at ``local_ms``."""
    if not pending or clock.release_at(pending[-1].deliver_at) <= local_ms:
        return len(pending)  # the common case: all of it (one look, not one per message)
    n = 0
    while n < len(pending) and clock.release_at(pending[n].deliver_at) <= local_ms:
        n += 1
    return n
