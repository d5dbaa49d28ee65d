"""The cluster's time: never ahead of what a majority's fresh clock readings say.

Every node sends each peer its clock reading twice a second, on the Raft keep-alive
(``cluster/raft/node.py``), and keeps the latest it takes of each with its age: how long
ago it arrived, by this node's monotonic clock, plus the link's transit measured from the
keep-alives' round trips and any wait on the way (``cluster/raft/peer_clocks.py``, which
also says when a reading is taken: the error is lateness, give or take half the link's
asymmetry). A reading under
``fresh_s`` old is *aged* forward by its age: the sender's clock now. An older reading
counts for nothing (its sender may be dead, its clock an hour off). One that arrived
"later" than now (a monotonic clock stepped back, as libfaketime steps it; Linux never
does, and the node then ends itself: cluster/raft/monotonic_watch.py) counts as received, not
aged, its age unknown: the error again is lateness. The *quorum time* is the k-th largest
of this node's own reading and the aged fresh ones, k a majority: a minority's clocks,
however far off, cannot move it, and it is no later than some honest clock.

The master stamps every entry and fires the wheel by :meth:`QuorumClock.now_ms`: its own
clock, no later than quorum time and no earlier than quorum time less ``tolerance_ms``.
A master whose clock steps an hour ahead so fires nothing early (beyond the honest clocks'
own error); one an hour behind resolves a ``deliver_after`` at most the tolerance early.
With fewer fresh readings than a majority, quorum time holds at the last one had: the
clock never runs ahead of what fresh readings allowed, late rather than early; the wheel
fires nothing new meanwhile, and the master serves nothing (:meth:`QuorumClock.fresh`). The
tolerance otherwise only decides a handover (:meth:`QuorumClock.offset_ms`, node/service.py).
docs/cluster.md, "Clocks".

Pure functions of their arguments; :class:`QuorumClock` reads the clocks and owns the
last quorum time (read and written on the event loop only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .clock import Clock

# (reading ms, seconds since it was read: since it arrived, by this node's monotonic clock,
# plus the transit), one per peer heard from
PeerReadings = Callable[[], list[tuple[int, float]]]


def majority(cluster_size: int) -> int:
    """How many nodes of ``cluster_size`` make a majority."""
    return cluster_size // 2 + 1


def quorum_ms(readings: Sequence[int], cluster_size: int) -> int | None:
    """The k-th largest reading, k a majority of ``cluster_size``; None with fewer readings."""
    k = majority(cluster_size)
    if len(readings) < k:
        return None
    return sorted(readings, reverse=True)[k - 1]


def fresh_quorum_ms(
    own: int, readings: Sequence[tuple[int, float]], cluster_size: int, fresh_s: float
) -> int | None:
    """Quorum time now: ``own`` and each reading under ``fresh_s`` old aged forward by its
    age (one with a negative age, from a monotonic clock stepped back, as received);
    None with fewer than a majority."""
    aged = [ms + max(0, int(age * 1000)) for ms, age in readings if age <= fresh_s]
    return quorum_ms([own, *aged], cluster_size)


def bounded_ms(own: int, quorum: int, tolerance_ms: int) -> int:
    """``own`` held within [``quorum - tolerance_ms``, ``quorum``]."""
    return min(max(own, quorum - tolerance_ms), quorum)


class QuorumClock:
    def __init__(
        self,
        clock: Clock,
        peer_readings: PeerReadings,
        cluster_size: Callable[[], int],
        tolerance_ms: int,
        fresh_s: float = 1.5,
    ) -> None:
        """``cluster_size()``: how many members vote now (the membership changes online)."""
        self.own = clock
        self._peer_readings = peer_readings
        self._size = cluster_size
        self.tolerance_ms = tolerance_ms
        self._fresh_s = fresh_s
        self._last_quorum: int | None = None  # the latest quorum time had from fresh readings

    def _fresh(self, own: int) -> int | None:
        return fresh_quorum_ms(own, self._peer_readings(), self._size(), self._fresh_s)

    def _quorum(self, own: int) -> int | None:
        """Quorum time from fresh readings, else the last had (None: never yet)."""
        q = self._fresh(own)
        if q is not None:
            self._last_quorum = q
        return self._last_quorum

    def known(self) -> bool:
        """Whether a majority's fresh readings have been in (a master fires nothing before)."""
        return self._quorum(self.own()) is not None

    def fresh(self) -> bool:
        """Whether a majority's readings are fresh now. Time held at the last quorum time
        lags the true time by as long as it has been held: a lease stamped by it would end
        that much early, a relative delay resolve that much early, so a master serves
        nothing then (node/service.py, ``require_master``)."""
        return self._fresh(self.own()) is not None

    def now_ms(self) -> int:
        """Own clock within [quorum time - tolerance, quorum time] (own clock while unknown)."""
        own = self.own()
        q = self._quorum(own)
        return own if q is None else bounded_ms(own, q, self.tolerance_ms)

    def offset_ms(self) -> int | None:
        """Own clock minus quorum time from fresh readings; None when too few are fresh."""
        own = self.own()
        q = self._fresh(own)
        return None if q is None else own - q
