"""What a watermark advance delivers: the same answer on every node.

Applying a committed advance ``W_old -> W_new`` delivers every stored message with
``W_old < key <= W_new``, in key order. Each node computes this from its own index
and heads, so delivery needs nothing but the committed watermark; a deposed master
that never commits an advance delivers nothing.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterator

import numpy as np

from horologe.storage.delay_index import MS_PER_HOUR, SECONDS_PER_HOUR
from horologe.storage.store_reads import StoreReads

from .loaded_second import LoadedSecond
from .watermark import Watermark


class SecondCache:
    """The last few seconds read, so a hot second released in many small advances is
    walked once and then only caught up."""

    def __init__(self, store: StoreReads, capacity: int = 8) -> None:
        self.store = store
        self.capacity = capacity
        self._seconds: OrderedDict[int, LoadedSecond] = OrderedDict()

    def get(self, abs_sec: int) -> LoadedSecond:
        s = self._seconds.get(abs_sec)
        if s is None:
            s = self._seconds[abs_sec] = LoadedSecond(self.store, abs_sec)
            while len(self._seconds) > self.capacity:
                self._seconds.popitem(last=False)
        else:
            self._seconds.move_to_end(abs_sec)
        return s

    def clear(self) -> None:
        self._seconds.clear()


def nonempty_seconds(store: StoreReads, first_ms: int, last_ms: int, hours: list[int]) -> Iterator[int]:
    """Epoch seconds between the two times (inclusive) that hold any message, looking
    only in ``hours`` (ascending hours that may hold messages)."""
    for hour in hours[bisect.bisect_left(hours, first_ms // MS_PER_HOUR) :]:
        start = hour * MS_PER_HOUR
        if start > last_ms:
            return
        counts = store.bucket(hour).heads.count
        s0 = max(0, (first_ms - start) // 1000)
        s1 = min(SECONDS_PER_HOUR - 1, (last_ms - start) // 1000)
        for sec in np.flatnonzero(counts[s0 : s1 + 1]):
            yield hour * 3600 + s0 + int(sec)


def expand(store: StoreReads, w_old: Watermark, w_new: Watermark, cache: SecondCache) -> Iterator[np.ndarray]:
    """Yield, second by second, the due rows (loaded_second.DUE) of the advance."""
    if w_new <= w_old:
        return
    for abs_sec in nonempty_seconds(store, w_old.ms, w_new.ms, store.hours()):
        rows = cache.get(abs_sec).between(w_old, w_new)
        if len(rows):
            yield rows
