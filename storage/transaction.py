"""The writes of one applied batch; committed whole or not at all (see Storage.apply).

A batch is handed what it reads and writes, not the store: the committed journal state,
the file table, the hour buckets (``bucket(hour)``), the ready segments and the key
index. What it removes it names in ``dropped_hours``, which the store reads once the
batch is done.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .commit_journal import JournalState
from .config import StorageConfig
from .delay_index import MS_PER_HOUR
from .errors import SealedHourError, UnknownMessageError
from .file_table import FileTable
from .hour_bucket import HourBucket
from .hour_names import parse_hour_name
from .key_index import KeyIndex, key_hashes
from .late_policies import policy_of
from .magic import READY_LOG
from .message import Message
from .message_columns import MessageColumns
from .message_id import MessageId, by_hour
from .moves import COPY_OF, MOVED_TO
from .ready_log import READY, ReadyEntry, base_key, floor_key, ready_segment_rel, rows_of
from .recent_records import SOON_MS, WrittenRecords
from .segments import Segment, SegmentedLog
from .tag_signature import tags_signature

# A batch's messages share a few tag sets: each set's signature is worked out once.
_signature_of = functools.lru_cache(maxsize=4096)(tags_signature)


class Transaction:
    def __init__(
        self,
        raft_index: int,
        *,
        committed: JournalState,
        config: StorageConfig,
        files: FileTable,
        bucket: Callable[[int], HourBucket],
        hours: Callable[[], list[int]],
        original_id: Callable[[MessageId], MessageId],
        ready_segments: Mapping[int, list[Segment]],
        key_index: KeyIndex,
    ) -> None:
        """``committed``: the state before this batch (the store's journal state; it does
        not change while the batch is open). ``bucket``, ``hours`` and ``original_id`` are
        the store's reads of its hours; ``ready_segments`` the committed segments of each
        topic's ready log (by topic id)."""
        self.raft_index = raft_index
        self._committed = committed
        self._config = config
        self._files = files
        self._bucket = bucket
        self._hours = hours
        self._original_id = original_id
        self._ready_segments = ready_segments
        self._key_index = key_index
        self.topics: dict[str, int] = {}
        self.meta: dict[str, Any] = {}
        self.buckets_touched: set[int] = set()
        self.dropped_hours: set[int] = set()
        self.fresh = np.zeros(0, dtype=bool)  # per message of the last append: stored by it
        self.written: list[WrittenRecords] = []  # records of messages due soon, for readers
        self.keys_added = 0  # keys this batch indexed (the key index cleans in proportion)
        self.key_clean_extra = 0  # key-index entries this batch may clean besides
        self._ready_logs: dict[int, SegmentedLog] = {}  # topics whose ready logs this batch touched

    def topic_id(self, topic: str) -> int:
        tid = self._committed.topics.get(topic)
        if tid is None:
            tid = self.topics.get(topic)
        if tid is None:
            tid = len(self._committed.topics) + len(self.topics)
            self.topics[topic] = tid
        return tid

    @property
    def _sealed_before_hour(self) -> int:
        """Committed: sealing takes effect when the batch commits (:meth:`seal_before`)."""
        return self._committed.meta.get("sealed_before_hour", 0)

    def set_meta(self, key: str, value: Any) -> None:
        """Set a meta value for the batch; ``None`` removes the key."""
        self.meta[key] = value

    def current_meta(self, key: str, default: Any = None) -> Any:
        """A meta value as this batch has left it so far."""
        meta = self.meta
        if key in meta:
            value = meta[key]
            return default if value is None else value
        return self._committed.meta.get(key, default)

    def meta_keys(self) -> list[str]:
        """Every meta key, as this batch has left them so far."""
        keys = set(self._committed.meta)
        keys |= {k for k, v in self.meta.items() if v is not None}
        keys -= {k for k, v in self.meta.items() if v is None}
        return sorted(keys)

    def append(self, messages: Sequence[Message] | MessageColumns, slot_ms=None) -> list[MessageId]:
        """Store messages, each filed at its slot (default: its deliver_at_ms); their ids.
        :meth:`append_columns` of a list of messages, answering ``MessageId`` objects."""
        cols = messages if isinstance(messages, MessageColumns) else MessageColumns.from_messages(messages)
        slots = cols.deliver_at_ms if slot_ms is None else np.asarray(slot_ms, dtype=np.int64)
        hours, gis = self.append_columns(cols, slots)
        return list(map(MessageId, hours.tolist(), gis.tolist()))

    def append_columns(
        self, cols: MessageColumns, slots: np.ndarray, copies: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """Store a batch, message ``i`` filed at ``slots[i]``; each one's id as (hours,
        globalIndexes) arrays. ``fresh`` then says which were stored by this call.

        Every message is validated before any byte is written. A message whose
        ``(topic, key)`` names a live message in the key index is not stored again: that
        message's id (the one it answers to, moves) is returned instead; so is the first
        one's for a key the batch repeats. Rescheduled ``copies`` are all stored, and their
        keys name them from now on (a key lives as long as its newest message's hour).
        """
        n = len(cols)
        cols.validate(self._config.limits)
        slot_hours = slots // MS_PER_HOUR
        sealed_before = self._sealed_before_hour
        if n and int(slot_hours.min()) < sealed_before:
            late = int(slot_hours[np.flatnonzero(slot_hours < sealed_before)[0]])
            raise SealedHourError(f"hour {late} is sealed; file late messages later")
        hours = np.zeros(n, dtype=np.int64)
        gis = np.zeros(n, dtype=np.int64)
        stored = np.ones(n, dtype=bool)
        first_with_key: dict[tuple[str, str], int] = {}
        repeats: list[tuple[int, int]] = []  # (position, the first position with its key)
        for i, key in enumerate(cols.keys):
            if key is not None:
                k = (cols.topics[i], key)
                if k in first_with_key and not copies:
                    repeats.append((i, first_with_key[k]))
                    stored[i] = False
                else:
                    first_with_key[k] = i
        asked = list(first_with_key)
        hashes = key_hashes(asked)
        known = [None] * len(asked) if copies else self._key_index.lookup_many(asked, hashes, self)
        for k, mid in zip(asked, known, strict=True):
            if mid is not None:
                i = first_with_key[k]
                hours[i], gis[i] = self._original_id(mid)
                stored[i] = False
        at = np.flatnonzero(stored)
        tids = self._topic_ids(cols.topics, at)
        sigs = self._tag_sigs(cols.tags, n)
        for hour in np.unique(slot_hours[at]).tolist():
            here = at[slot_hours[at] == hour]
            self.buckets_touched.add(hour)
            hours[here] = hour
            gis[here], records = self._bucket(hour).append(cols, here, slots[here], tids[here], sigs[here])
            self._note_soon(cols, here, hour, gis[here], records)
        for i, h in cols.headers.items():
            policy = policy_of(h) if stored[i] else None
            if policy is not None:
                self._bucket(int(hours[i])).add_late(int(gis[i]), *policy)
        for i, j in repeats:
            hours[i], gis[i] = hours[j], gis[j]
        self.fresh = stored
        new = [(first_with_key[k], h) for k, h, mid in zip(asked, hashes, known, strict=True) if mid is None]
        firsts = np.array([i for i, _ in new], dtype=np.int64)
        self._key_index.add_hashed(self, [h for _, h in new], hours[firsts], gis[firsts])
        self.keys_added += len(new)
        return hours, gis

    def _note_soon(
        self, cols: MessageColumns, here: np.ndarray, hour: int, gis: np.ndarray, records: list[bytes]
    ) -> None:
        """List the records of the messages at ``here`` due soon after their production
        (recent_records.py), for the readers to keep."""
        if not self._config.recent_records_bytes:
            return
        soon = cols.deliver_at_ms[here] - cols.produced_at_ms[here] <= SOON_MS
        if soon.all():
            self.written.append(WrittenRecords(hour, gis.tolist(), records))
        elif soon.any():
            ks = np.flatnonzero(soon).tolist()
            self.written.append(WrittenRecords(hour, gis[ks].tolist(), [records[k] for k in ks]))

    def _topic_ids(self, topics: list[str], at: np.ndarray) -> np.ndarray:
        """The topic id of each message (registering new topics in the order they appear
        among the messages at ``at``)."""
        ids = {t: self.topic_id(t) for t in dict.fromkeys(topics[i] for i in at.tolist())}
        return np.array([ids.get(t, 0) for t in topics], dtype=np.int64)

    @staticmethod
    def _tag_sigs(tags: dict[int, tuple[str, ...]], n: int) -> np.ndarray:
        sigs = np.zeros(n, dtype=np.uint64)
        if tags:
            at = np.fromiter(tags, dtype=np.int64, count=len(tags))
            sigs[at] = np.fromiter(map(_signature_of, tags.values()), dtype=np.uint64, count=len(tags))
        return sigs

    def cancel(self, mid: MessageId) -> bool:
        """Tombstone a stored message; False when it already was one."""
        return self.cancel_many([mid])[0]

    def cancel_many(self, mids: list[MessageId]) -> list[bool]:
        """:meth:`cancel` of each, with one append per hour: whether each was tombstoned
        now (False: it already was, or the call named it before)."""
        done = [False] * len(mids)
        sealed_before = self._sealed_before_hour
        for hour, ks in by_hour(mids).items():
            if hour < sealed_before:
                raise SealedHourError(f"message {mids[ks[0]]} is in a sealed hour")
            bucket = self._bucket(hour)
            n, mask = bucket.count, bucket.cancelled_mask()
            fresh: dict[int, None] = {}
            for k in ks:
                gi = mids[k].global_index
                if not 0 <= gi < n:
                    raise UnknownMessageError(f"no message {mids[k]}")
                if not mask[gi] and gi not in fresh:
                    fresh[gi] = None
                    done[k] = True
            if fresh:
                self.buckets_touched.add(hour)
                bucket.add_tombstones(list(fresh))
        return done

    def link_moves(self, originals: list[MessageId], copies: list[MessageId]) -> None:
        """Record that each of ``originals`` lives now at its rescheduled copy (moves), with
        one append per hour and kind of link; the caller tombstoned where each lived before
        and stored the copies."""
        for kind, here, there in ((MOVED_TO, originals, copies), (COPY_OF, copies, originals)):
            for hour, ks in by_hour(here).items():
                self.buckets_touched.add(hour)
                self._bucket(hour).add_moves([here[k].global_index for k in ks], kind, [there[k] for k in ks])

    def record_late(self, mid: MessageId, outcome: int, late_by_ms: int) -> None:
        """Record that ``mid`` fell due too late and was dropped or dead-lettered (late_policies)."""
        self.buckets_touched.add(mid.hour)
        self._bucket(mid.hour).add_late(mid.global_index, outcome, late_by_ms)

    # -- ready logs -------------------------------------------------------------

    def _ready_log(self, tid: int) -> SegmentedLog:
        log = self._ready_logs.get(tid)
        if log is None:
            log = self._ready_logs[tid] = SegmentedLog(
                self._files,
                READY,
                READY_LOG,
                list(self._ready_segments.get(tid, [])),
                self.current_meta(base_key(tid), 0),
                lambda first: ready_segment_rel(tid, first),
            )
        return log

    def append_ready(self, topic: str, entries: Sequence[ReadyEntry] | np.ndarray) -> int:
        """Append delivered messages (``ReadyEntry`` tuples, or sealed rows: ready_rows) to a
        topic's ready log; return the first new offset.

        Each segment's floor (meta ``ready_floor/<segment>``, the lowest hour its entries
        name) is kept as entries arrive: retention never removes an hour a held ready
        entry still names (:meth:`drop_hours_before`)."""
        config = self._config
        log = self._ready_log(self.topic_id(topic))
        first = log.end
        if not len(entries):
            return first
        rows = rows_of(entries)
        span = config.ready_segment_span_ms
        windows = rows["delivered_at_ms"] // span
        cuts = [0, *(np.flatnonzero(np.diff(windows)) + 1).tolist(), len(rows)]
        opened: set[str] = set()
        for lo, hi in itertools.pairwise(cuts):
            tail = log.segments[-1][1] if log.segments else None
            # A segment holds deliveries of one span at most, so a quiet topic's old
            # entries do not wait in a tail that never fills (and hold their hours back).
            roll = tail is not None and self._first_delivered(tail) // span != int(windows[lo])
            blob = rows[lo:hi].tobytes()
            opened.update(log.append(blob, config.ready_segment_entries, new_segment=roll))
        hours = rows["hour"].astype(np.int64)
        for seg_first, rel in log.overlapping(first, first + len(rows)):
            lo = max(seg_first, first) - first
            hi = min(seg_first + log.entries_in(rel), first + len(rows)) - first
            low = int(hours[lo:hi].min())
            floor = self.current_meta(floor_key(rel), None)
            if rel in opened or (floor is not None and low < floor):
                self.set_meta(floor_key(rel), low)
        return first

    def _first_delivered(self, rel: str) -> int:
        f = self._files.get(rel)
        return int(READY.read(f, 0, 1, 0)["delivered_at_ms"][0])

    def trim_ready(self, topic: str, offset: int) -> int:
        """Retention: remove the ready segments that end at or before ``offset``; return the
        new base (the first offset still held). Offsets of what is left never change."""
        tid = self._committed.topics.get(topic)
        if tid is None:
            return 0
        log = self._ready_log(tid)
        while log.segments:
            first, rel = log.segments[0]
            end = first + log.entries_in(rel)
            if end > offset:
                break
            self._files.remove(rel)
            self.set_meta(floor_key(rel), None)
            log.segments.pop(0)
            log.base = end
        if log.base != self.current_meta(base_key(tid), 0):
            self.set_meta(base_key(tid), log.base)
        return log.base

    def ready_floor(self) -> int | None:
        """The lowest hour any held ready entry names (None: no ready entries)."""
        held = self._ready_segments
        floors = []
        for tid in set(held) | set(self._ready_logs):
            segs = self._ready_logs[tid].segments if tid in self._ready_logs else held[tid]
            floors += [self.current_meta(floor_key(rel), 0) for _, rel in segs]
        return min(floors, default=None)

    # -- sealing and retention --------------------------------------------------

    def seal_before(self, hour: int) -> None:
        """Hours before ``hour`` are delivered: no appends or cancels, snapshots hard-link them."""
        if hour > self._sealed_before_hour:
            self.meta["sealed_before_hour"] = hour

    def drop_hours_before(self, hour: int) -> int:
        """Retention: delete the files of delivered hours before ``hour``; return the hour
        retention now starts at. Never past the sealed hours, nor past an hour that a ready
        entry still held names (trim the ready logs first)."""
        retained_from = self._committed.meta.get("retained_from_hour", 0)
        hour = min(hour, self._sealed_before_hour)
        floor = self.ready_floor()
        if floor is not None:
            hour = min(hour, floor)
        for h in self._hours():
            if h >= hour:
                break
            self._drop_hour(h)
        # A reschedule link outlives its hour while the message it leads to may still be
        # asked about (moves): until the hour the message lives in goes too.
        for rel in [r for r in self._committed.files if r.startswith("delay/") and r.endswith(".move")]:
            h = parse_hour_name(rel[len("delay/") : -len(".move")])
            if h < hour and not self._bucket(h).moves_reach(hour):
                self._files.remove(rel)
                self.dropped_hours.add(h)
        if hour > retained_from:
            self.meta["retained_from_hour"] = hour
        return max(hour, retained_from)

    def _drop_hour(self, hour: int) -> None:
        """Remove an hour's files (its reschedule links aside); the store forgets the hour
        once the batch commits (``dropped_hours``)."""
        bucket = self._bucket(hour)
        for rel in (bucket.log_rel, bucket.idx_rel, bucket.tomb_rel, bucket.late_rel):
            self._files.remove(rel)
        self.dropped_hours.add(hour)

    def clean_keys(self, entries: int) -> None:
        """Let the key index clean up to ``entries`` more this batch (retention entries)."""
        self.key_clean_extra += entries
