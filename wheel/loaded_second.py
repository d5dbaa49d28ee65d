"""One second's messages, sorted for delivery and caught up from storage on demand.

Delivery order within a second is ``(slot_ms, local_index)``: by millisecond, then
arrival. The rows are a numpy structured array of dtype :data:`DUE`, the same rows
the wheel hands out as due refs.
"""

from __future__ import annotations

import numpy as np

from horologe.storage.store_reads import StoreReads

from .watermark import ALL, Watermark

DUE = np.dtype([("hour", "<u4"), ("global_index", "<u4"), ("slot_ms", "<i8"), ("local_index", "<u4")])


def empty_due() -> np.ndarray:
    return np.empty(0, dtype=DUE)


class LoadedSecond:
    """Second ``abs_sec`` (epoch seconds) of a store. The hour bucket is looked up on
    every refresh, never kept: the store may close and reopen buckets in between."""

    __slots__ = ("store", "abs_sec", "known", "last_gi", "rows")

    def __init__(self, store: StoreReads, abs_sec: int) -> None:
        self.store = store
        self.abs_sec = abs_sec
        self.known = 0  # how many of the second's messages ``rows`` holds
        self.last_gi = -1  # the globalIndex of the last of them to arrive
        self.rows = empty_due()

    @property
    def start_ms(self) -> int:
        return self.abs_sec * 1000

    def refresh(self) -> None:
        """Take in messages that arrived since the last look: reads only the new ones."""
        hour, sec = divmod(self.abs_sec, 3600)
        bucket = self.store.bucket(hour)
        n = int(bucket.heads.count[sec])
        if n == self.known:
            return
        gis = bucket.chain(sec, self.known, self.last_gi)
        if not len(gis):  # fewer than known: nothing new to take in
            self.known = n
            return
        view = bucket.index_view()
        new = np.empty(len(gis), dtype=DUE)
        new["hour"] = hour
        new["global_index"] = gis
        new["slot_ms"] = self.start_ms + view["ms"][gis].astype(np.int64)
        new["local_index"] = view["local_index"][gis]
        rows = np.concatenate([self.rows, new]) if len(self.rows) else new
        self.rows = rows[np.lexsort((rows["local_index"], rows["slot_ms"]))]
        self.known = n
        self.last_gi = int(gis[-1])

    def first_after(self, w: Watermark) -> int:
        """Position of the first row whose key is greater than ``w``."""
        slot = self.rows["slot_ms"]
        lo = int(np.searchsorted(slot, w.ms, "left"))
        hi = int(np.searchsorted(slot, w.ms, "right"))
        return lo + int(np.searchsorted(self.rows["local_index"][lo:hi], w.local_index, "right"))

    def between(self, w_old: Watermark, w_new: Watermark) -> np.ndarray:
        """Rows with ``w_old < key <= w_new``, in delivery order."""
        self.refresh()
        return self.rows[self.first_after(w_old) : self.first_after(w_new)]

    def fully_behind(self, w: Watermark) -> bool:
        """Nothing in this second, now or arriving later, can still be ahead of ``w``."""
        return (self.start_ms + 999, ALL) <= tuple(w)
