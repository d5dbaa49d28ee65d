"""Consumer-group progress over a topic's ready log, kept in the replicated meta.

For each (group, ready topic): ``committed``, the offset below which every entry is
acknowledged (or skipped by the group's filter), and the acknowledged ranges above it.
Acks mostly arrive in order and in runs (a consumer acks a pulled batch), so the ranges
stay few, and fold into ``committed`` as soon as they reach it.

Retries of a group live in the ready log ``%RETRY%<group>`` (the copy's header
``x-horologe-topic`` names the topic it came from); messages past the last retry level
go to ``%DLQ%<group>``, which is consumed like any topic.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
ORIGIN_HEADER = "x-horologe-topic"  # a retry's copy: the topic it was first delivered on
ID_HEADER = "x-horologe-id"  # a rescheduled copy or a retry: the id it answers to (storage/moves.py)


def retry_headers(headers: dict[str, str], topic: str, mid: str) -> dict[str, str]:
    """A retry's headers: its message's (``headers``, produced to ``topic`` as ``mid``),
    naming the topic and id it answers to; a retry of a retry keeps its first's."""
    return {
        **headers,
        ORIGIN_HEADER: headers.get(ORIGIN_HEADER, topic),
        ID_HEADER: headers.get(ID_HEADER, mid),
    }


def progress_key(group: str, topic: str) -> str:
    return f"group/{group}/{topic}"


def retry_topic(group: str) -> str:
    return f"{RETRY_PREFIX}{group}"


def dlq_topic(group: str) -> str:
    return f"{DLQ_PREFIX}{group}"


def ready_logs(group: str, topic: str) -> tuple[str, ...]:
    """The ready logs a pull of ``topic`` by ``group`` reads: the topic's, and the group's
    retries (a dead-letter queue has none)."""
    return (topic,) if topic.startswith(DLQ_PREFIX) else (topic, retry_topic(group))


Range = tuple[int, int]  # ready-log offsets lo <= o < hi


@dataclass(frozen=True)
class GroupProgress:
    """Pulsar's mark-delete position with individually acked ranges: ``committed``, and
    the acked ranges above it (sorted, disjoint, not touching, none starting at
    ``committed``, which would have been folded in). Wire form ``{"c": committed,
    "r": [[lo, hi], ...]}``; ``{"c", "a": [offset, ...]}`` of earlier versions is read."""

    committed: int = 0
    acked: tuple[Range, ...] = ()

    @classmethod
    def from_wire(cls, value: dict | None) -> GroupProgress:
        if not value:
            return cls()
        if "a" in value:  # one offset per acked message, before ranges
            return cls(int(value["c"])).ack(to_ranges(value["a"]))
        return cls(int(value["c"]), tuple((int(lo), int(hi)) for lo, hi in value["r"]))

    def to_wire(self) -> dict:
        return {"c": self.committed, "r": [list(r) for r in self.acked]}

    def is_acked(self, offset: int) -> bool:
        if offset < self.committed:
            return True
        k = bisect.bisect_right(self.acked, (offset, _END)) - 1
        return k >= 0 and offset < self.acked[k][1]

    def acked_mask(self, offsets: np.ndarray) -> np.ndarray:
        """``is_acked`` of each of ``offsets`` (ascending or not), as one bool array."""
        mask = offsets < self.committed
        if self.acked:
            los = np.array([lo for lo, _ in self.acked], dtype=np.int64)
            his = np.array([hi for _, hi in self.acked], dtype=np.int64)
            k = np.searchsorted(los, offsets, side="right") - 1
            mask |= (k >= 0) & (offsets < his[np.maximum(k, 0)])
        return mask

    def first_unacked(self, offset: int) -> int:
        """The first offset at or after ``offset`` that is not acked."""
        if offset < self.committed:
            return self.committed
        k = bisect.bisect_right(self.acked, (offset, _END)) - 1
        return self.acked[k][1] if k >= 0 and offset < self.acked[k][1] else offset

    def unacked_end(self, start: int, count: int) -> int:
        """Where a stretch from ``start`` (at or above ``committed``) that holds ``count``
        offsets not acked ends: the acked ranges within it are not counted."""
        ranges = [(max(lo, start), hi) for lo, hi in self.acked if hi > start]
        if not ranges:
            return start + count
        los = np.array([lo for lo, _ in ranges], dtype=np.int64)
        his = np.array([hi for _, hi in ranges], dtype=np.int64)
        before = np.cumsum(los - np.r_[start, his[:-1]])  # offsets not acked below each range
        k = int(np.searchsorted(before, count))
        if k == len(ranges):
            return int(his[-1]) + count - int(before[-1])
        return int(los[k]) - (int(before[k]) - count)

    def skip_to(self, offset: int) -> GroupProgress:
        """Progress with everything below ``offset`` passed (retention removed it)."""
        if self.committed >= offset:
            return self
        return GroupProgress(offset).ack(self.acked)

    def ack(self, ranges) -> GroupProgress:
        """Progress with the offsets of ``ranges`` (``(lo, hi)`` pairs) acked too."""
        merged = merge_ranges(
            (max(lo, self.committed), hi) for lo, hi in [*self.acked, *ranges] if hi > self.committed
        )
        committed = self.committed
        if merged and merged[0][0] == committed:
            committed = merged.pop(0)[1]
        return GroupProgress(committed, tuple(merged))


_END = 1 << 64  # sorts after any hi: bisect by lo alone


def merge_ranges(ranges) -> list[Range]:
    """``(lo, hi)`` ranges (any order, overlapping or not) as the fewest sorted ones."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if lo >= hi:
            continue
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


def to_ranges(offsets) -> list[Range]:
    """Offsets (any order, duplicates allowed) as the fewest ``(lo, hi)`` ranges. In
    arrays: a pull's thousand offsets were a thousand Python ranges sorted and merged."""
    a = np.asarray(offsets, dtype=np.int64)
    if not len(a):
        return []
    if a[-1] - a[0] == len(a) - 1 and (np.diff(a) == 1).all():  # one run in order: a pull's, mostly
        return [(int(a[0]), int(a[-1]) + 1)]
    a = np.unique(a)
    cut = np.flatnonzero(np.diff(a) != 1) + 1  # where a run ends and the next begins
    los, his = a[np.r_[0, cut]], a[np.r_[cut - 1, len(a) - 1]] + 1
    return list(zip(los.tolist(), his.tolist(), strict=True))
