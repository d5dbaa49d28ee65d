"""The cluster's time: this node's clock, held within a tolerance of what a majority's clocks say.

Every node sends each peer its clock reading twice a second, on the Raft keep-alive
(``cluster/raft_node.py``). The *quorum time* is the latest instant that a majority's
readings have all reached: the k-th largest reading, k a majority, this node's own
included. A minority's clocks, however far off, cannot move it.

The master stamps every entry and fires the wheel by :meth:`QuorumClock.now_ms`: its own
clock clamped to quorum time ± ``tolerance_ms``. A master whose clock steps an hour ahead
so fires nothing more than the tolerance early, and one an hour behind resolves no
``deliver_after`` early. Readings are used as received, never aged forward by this
node's monotonic clock (which may jump with the wall clock): a stale reading only holds
time back, so the error is lateness, never earliness. docs/cluster.md, "Clocks".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .clock import Clock

# (reading ms, seconds since it arrived), one per peer heard from
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


class QuorumClock:
    def __init__(
        self,
        clock: Clock,
        peer_readings: PeerReadings,
        cluster_size: int,
        tolerance_ms: int,
        fresh_s: float = 1.5,
    ) -> None:
        self.own = clock
        self._peer_readings = peer_readings
        self._size = cluster_size
        self.tolerance_ms = tolerance_ms
        self._fresh_s = fresh_s

    def _quorum(self, own: int, fresh_only: bool) -> int | None:
        peers = [ms for ms, age in self._peer_readings() if not fresh_only or age <= self._fresh_s]
        return quorum_ms([own, *peers], self._size)

    def known(self) -> bool:
        """Whether a majority's readings are in (a master fires nothing before)."""
        return self._quorum(self.own(), False) is not None

    def now_ms(self) -> int:
        """Own clock clamped to quorum time ± tolerance (own clock while quorum time is unknown)."""
        own = self.own()
        q = self._quorum(own, False)
        if q is None:
            return own
        return min(max(own, q - self.tolerance_ms), q + self.tolerance_ms)

    def offset_ms(self) -> int | None:
        """Own clock minus quorum time from readings under ``fresh_s`` old; None when too few are."""
        own = self.own()
        q = self._quorum(own, True)
        return None if q is None else own - q
