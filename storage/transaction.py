"""The writes of one applied batch; committed whole or not at all (see Storage.apply)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .delay_index import MS_PER_HOUR
from .errors import SealedHourError, UnknownMessageError
from .magic import READY_LOG
from .message import Message
from .message_id import MessageId
from .ready_log import READY, ReadyEntry, base_key, floor_key, ready_segment_rel, rows_of
from .segments import SegmentedLog
from .tag_signature import tags_signature

if TYPE_CHECKING:  # hints only: store imports this module, and imports stay acyclic
    from .store import Storage


class Transaction:
    def __init__(self, store: Storage, raft_index: int) -> None:
        self.store = store
        self.raft_index = raft_index
        self.topics: dict[str, int] = {}
        self.meta: dict[str, Any] = {}
        self.buckets_touched: set[int] = set()
        self.dropped_hours: set[int] = set()
        self.fresh: list[bool] = []  # per message of the last append: stored now (not a known key)
        self.keys_added = 0  # keys this batch indexed (the key index cleans in proportion)
        self.key_clean_extra = 0  # key-index entries this batch may clean besides
        self._ready_logs: dict[int, SegmentedLog] = {}  # topics whose ready logs this batch touched

    def topic_id(self, topic: str) -> int:
        tid = self.store.topic_id(topic)
        if tid is None:
            tid = self.topics.get(topic)
        if tid is None:
            tid = len(self.store.topics()) + len(self.topics)
            self.topics[topic] = tid
        return tid

    def set_meta(self, key: str, value: Any) -> None:
        """Set a meta value for the batch; ``None`` removes the key."""
        self.meta[key] = value

    def append(self, messages: Sequence[Message], slot_ms: Sequence[int] | None = None) -> list[MessageId]:
        """Store messages, each filed at its slot (default: its deliver_at_ms).

        Every message is validated before any byte is written. A message whose
        ``(topic, key)`` names a live message in the key index is not stored again: that
        message's id is returned instead.
        """
        store = self.store
        slots = [m.deliver_at_ms for m in messages] if slot_ms is None else list(slot_ms)
        sealed = store.sealed_before_hour
        for msg, slot in zip(messages, slots, strict=True):
            store.config.limits.validate(msg)
            if slot // MS_PER_HOUR < sealed:
                raise SealedHourError(f"hour {slot // MS_PER_HOUR} is sealed; file late messages later")
        ids: list[MessageId | None] = [None] * len(messages)
        known = set()  # positions answered from the key index
        by_hour: dict[int, list[tuple[int, tuple[Message, int, int, int]]]] = {}
        first_with_key: dict[tuple[str, str], int] = {}
        dup_of: dict[int, int] = {}
        asked = list(dict.fromkeys((m.topic, m.key) for m in messages if m.key is not None))
        seen = dict(zip(asked, store.key_index.lookup_many(asked), strict=True))
        for i, (msg, slot) in enumerate(zip(messages, slots, strict=True)):
            if msg.key is not None:
                k = (msg.topic, msg.key)
                if k in first_with_key:
                    dup_of[i] = first_with_key[k]
                    continue
                if seen[k] is not None:
                    ids[i] = seen[k]
                    known.add(i)
                    continue
                first_with_key[k] = i
            item = (msg, slot, self.topic_id(msg.topic), tags_signature(msg.tags))
            by_hour.setdefault(slot // MS_PER_HOUR, []).append((i, item))
        for hour in sorted(by_hour):
            bucket = store.bucket(hour)
            self.buckets_touched.add(hour)
            gis = bucket.append([item for _, item in by_hour[hour]])
            for (i, _), gi in zip(by_hour[hour], gis, strict=True):
                ids[i] = MessageId(hour, gi)
        self.fresh = [i not in known and i not in dup_of for i in range(len(messages))]
        for i, j in dup_of.items():
            ids[i] = ids[j]
        keyed = [(topic, key, ids[i]) for (topic, key), i in first_with_key.items()]
        store.key_index.add(keyed)  # type: ignore[arg-type]
        self.keys_added += len(keyed)
        return ids  # type: ignore[return-value]

    def cancel(self, mid: MessageId) -> bool:
        """Tombstone a stored message; False when it already was one."""
        store = self.store
        if mid.hour < store.sealed_before_hour:
            raise SealedHourError(f"message {mid} is in a sealed hour")
        bucket = store.bucket(mid.hour)
        if not 0 <= mid.global_index < bucket.count:
            raise UnknownMessageError(f"no message {mid}")
        if bucket.is_cancelled(mid.global_index):
            return False
        self.buckets_touched.add(mid.hour)
        bucket.add_tombstone(mid.global_index)
        return True

    # -- ready logs -------------------------------------------------------------

    def _ready_log(self, tid: int) -> SegmentedLog:
        log = self._ready_logs.get(tid)
        if log is None:
            store = self.store
            log = self._ready_logs[tid] = SegmentedLog(
                store.files,
                READY,
                READY_LOG,
                list(store._ready_segs.get(tid, [])),
                store.current_meta(base_key(tid), 0),
                lambda first: ready_segment_rel(tid, first),
            )
        return log

    def append_ready(self, topic: str, entries: Sequence[ReadyEntry] | np.ndarray) -> int:
        """Append delivered messages (``ReadyEntry`` tuples, or sealed rows: ready_rows) to a
        topic's ready log; return the first new offset.

        Each segment's floor (meta ``ready_floor/<segment>``, the lowest hour its entries
        name) is kept as entries arrive: retention never removes an hour a held ready
        entry still names (:meth:`drop_hours_before`)."""
        store = self.store
        log = self._ready_log(self.topic_id(topic))
        first = log.end
        if not len(entries):
            return first
        rows = rows_of(entries)
        span = store.config.ready_segment_span_ms
        windows = rows["delivered_at_ms"] // span
        cuts = [0, *(np.flatnonzero(np.diff(windows)) + 1).tolist(), len(rows)]
        opened: set[str] = set()
        for lo, hi in itertools.pairwise(cuts):
            tail = log.segments[-1][1] if log.segments else None
            # A segment holds deliveries of one span at most, so a quiet topic's old
            # entries do not wait in a tail that never fills (and hold their hours back).
            roll = tail is not None and self._first_delivered(tail) // span != int(windows[lo])
            blob = rows[lo:hi].tobytes()
            opened.update(log.append(blob, store.config.ready_segment_entries, new_segment=roll))
        hours = rows["hour"].astype(np.int64)
        for seg_first, rel in log.overlapping(first, first + len(rows)):
            lo = max(seg_first, first) - first
            hi = min(seg_first + log.entries_in(rel), first + len(rows)) - first
            low = int(hours[lo:hi].min())
            floor = store.current_meta(floor_key(rel), None)
            if rel in opened or (floor is not None and low < floor):
                self.set_meta(floor_key(rel), low)
        return first

    def _first_delivered(self, rel: str) -> int:
        f = self.store.files.get(rel)
        return int(READY.read(f, 0, 1, 0)["delivered_at_ms"][0])

    def trim_ready(self, topic: str, offset: int) -> int:
        """Retention: remove the ready segments that end at or before ``offset``; return the
        new base (the first offset still held). Offsets of what is left never change."""
        tid = self.store.topic_id(topic)
        if tid is None:
            return 0
        log = self._ready_log(tid)
        while log.segments:
            first, rel = log.segments[0]
            end = first + log.entries_in(rel)
            if end > offset:
                break
            self.store.files.remove(rel)
            self.set_meta(floor_key(rel), None)
            log.segments.pop(0)
            log.base = end
        if log.base != self.store.current_meta(base_key(tid), 0):
            self.set_meta(base_key(tid), log.base)
        return log.base

    def ready_floor(self) -> int | None:
        """The lowest hour any held ready entry names (None: no ready entries)."""
        store = self.store
        floors = []
        for tid in set(store._ready_segs) | set(self._ready_logs):
            segs = self._ready_logs[tid].segments if tid in self._ready_logs else store._ready_segs[tid]
            floors += [store.current_meta(floor_key(rel), 0) for _, rel in segs]
        return min(floors, default=None)

    # -- sealing and retention --------------------------------------------------

    def seal_before(self, hour: int) -> None:
        """Hours before ``hour`` are delivered: no appends or cancels, snapshots hard-link them."""
        if hour > self.store.sealed_before_hour:
            self.meta["sealed_before_hour"] = hour

    def drop_hours_before(self, hour: int) -> int:
        """Retention: delete the files of delivered hours before ``hour``; return the hour
        retention now starts at. Never past the sealed hours, nor past an hour that a ready
        entry still held names (trim the ready logs first)."""
        store = self.store
        hour = min(hour, store.sealed_before_hour)
        floor = self.ready_floor()
        if floor is not None:
            hour = min(hour, floor)
        for h in store.hours():
            if h >= hour:
                break
            store.drop_bucket(h)
        if hour > store.meta("retained_from_hour", 0):
            self.meta["retained_from_hour"] = hour
        return max(hour, store.meta("retained_from_hour", 0))

    def clean_keys(self, entries: int) -> None:
        """Let the key index clean up to ``entries`` more this batch (retention entries)."""
        self.key_clean_extra += entries
