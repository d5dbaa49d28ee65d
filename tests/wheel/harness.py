"""A single-node stand-in for the apply path: store, wheel and expansion on a fake clock."""

from __future__ import annotations

import heapq
import itertools

import numpy as np

from horologe.storage import Message, MessageId, Storage, StorageConfig
from horologe.wheel import SecondCache, TimeWheel, Watermark, expand


class Node:
    """Appends as the cluster will: late messages are filed behind W and delivered at once."""

    def __init__(self, root: str, start_ms: int, **wheel_args) -> None:
        self.root = root
        self.wheel_args = wheel_args
        self.store = Storage(root, StorageConfig(fsync=False, max_open_hours=2, max_cached_hours=4))
        self.wheel = TimeWheel(self.store, Watermark(start_ms), **wheel_args)
        self.cache = SecondCache(self.store)
        self.ri = 0
        self.delivered: list[MessageId] = []  # in delivery order
        self.deliver_at: dict[MessageId, int] = {}
        self.delivered_when: dict[MessageId, int] = {}

    @property
    def ws(self) -> Watermark:
        return self.wheel.ws

    def produce(self, times: list[int], now_ms: int) -> list[MessageId]:
        w = self.ws
        slots = [w.late_slot(t) if w.passed(t) else t for t in times]
        batch = [Message("t", str(t).encode(), t, now_ms) for t in times]
        self.ri += 1

        def apply(tx):
            tx.seal_before(w.sealed_before_hour())
            return tx.append(batch, slots)

        ids = self.store.apply(self.ri, apply)
        for mid, t in zip(ids, times, strict=True):
            self.deliver_at[mid] = t
            if w.passed(t):  # delivered on arrival
                self._deliver(mid, now_ms)
        self.wheel.on_append(slots)
        return ids

    def _deliver(self, mid: MessageId, now_ms: int) -> None:
        assert mid not in self.delivered_when, f"{mid} delivered twice"
        self.delivered.append(mid)
        self.delivered_when[mid] = now_ms

    def advance(self, now_ms: int, limit: int | None = None) -> np.ndarray:
        w_old = self.ws
        due = self.wheel.advance_to(now_ms, limit)
        expanded = list(expand(self.store, w_old, self.ws, self.cache))
        authoritative = np.concatenate(expanded) if expanded else due[:0]
        assert np.array_equal(due, authoritative), "wheel and expansion disagree"
        for row in due:
            self._deliver(MessageId(int(row["hour"]), int(row["global_index"])), now_ms)
        return due

    def restart(self, reopen_store: bool) -> None:
        """A new master: a fresh wheel from the exported ws (and maybe a reopened store)."""
        wire = self.ws.to_wire()
        if reopen_store:
            self.store.close()
            self.store = Storage(self.root, StorageConfig(fsync=False, max_open_hours=2, max_cached_hours=4))
            self.cache = SecondCache(self.store)
        self.wheel = TimeWheel(self.store, Watermark.from_wire(wire), **self.wheel_args)

    def close(self) -> None:
        self.store.close()


class HeapOracle:
    """The obvious model: a heap of (deliver_at, arrival) for what is not yet delivered."""

    def __init__(self) -> None:
        self.heap: list[tuple[int, int, MessageId]] = []
        self.seq = itertools.count()

    def add(self, mid: MessageId, deliver_at: int) -> None:
        heapq.heappush(self.heap, (deliver_at, next(self.seq), mid))

    def pop_due(self, now_ms: int, limit: int | None = None) -> list[MessageId]:
        out = []
        while self.heap and self.heap[0][0] <= now_ms and (limit is None or len(out) < limit):
            out.append(heapq.heappop(self.heap)[2])
        return out
