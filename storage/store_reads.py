"""Reading a store at a committed state: shared by the writer and by readers on other threads.

:class:`StoreReads` holds every read of the engine (hour buckets, messages, index
entries, tombstones, ready logs, names, meta) over a committed state: the applied
Raft index, the committed length of every file, the topic ids and the small meta.
:class:`~horologe.storage.store.Storage` reads at the state its journal folds;
:class:`~horologe.storage.store_reader.StoreReader` reads at a
:class:`CommittedState` the writer published, so it never sees a byte past a commit.

Every file the journal names is append-only below its committed length, which is
what makes reading beside a writer safe without a lock.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from .config import StorageConfig
from .delay_index import INDEX
from .errors import MessageExpiredError, ReadyTrimmedError
from .file_table import FileTable
from .hour_bucket import HourBucket
from .hour_names import hour_name, parse_hour_name
from .magic import MAGIC_SIZE, READY_LOG, check_magic
from .message import StoredMessage
from .message_id import MessageId, by_hour
from .ready_log import READY, base_key, floor_key, ready_segment_rel, ready_segments
from .recent_records import RecentRecords, WrittenRecords
from .segments import SegmentedLog


@dataclass(frozen=True)
class CommittedState:
    """What one applied batch left committed, as the writer publishes it to readers.

    ``files``, ``topics`` and ``meta`` are the writer's copies at that batch, never
    changed afterwards. ``generation`` changes when the store's files were replaced
    whole (a snapshot installed); ``names_version`` when topics or hours were added or
    removed. ``written``: the records of messages due soon that the batch appended, for a
    reader to keep (recent_records.py).
    """

    applied_index: int
    files: Mapping[str, int]
    topics: Mapping[str, int]
    meta: Mapping[str, Any]
    generation: int
    names_version: int
    written: tuple[WrittenRecords, ...] = ()  # records of messages due soon this batch appended


class StoreReads:
    directory: str
    config: StorageConfig
    read_only: bool
    files: FileTable
    _recent: RecentRecords | None = None  # a reader's records of messages due soon (the writer has none)

    def _state(self) -> CommittedState:
        raise NotImplementedError

    def _in_batch(self) -> bool:
        """True while a batch is open: its files must stay open until it commits."""
        return False

    def _init_reads(self) -> None:
        self._buckets: OrderedDict[int, HourBucket] = OrderedDict()  # LRU: heads in memory
        self._with_files: OrderedDict[int, None] = OrderedDict()  # LRU: buckets with open fds
        self._mapped: set[int] = set()
        # ready segment -> the ranges of its positions whose checksums were verified, merged
        self._ready_verified: dict[str, list[tuple[int, int]]] = {}
        self._indexed_files: set[str] = set()  # the files the names below were read from
        self._reindex_names()

    def _reindex_names(self) -> None:
        """Topic names, hours and ready segments from the committed state. A store gains
        files one hour at a time, thousands of hours in a bulk load: only what a batch
        added is read, unless it removed any."""
        st = self._state()
        self._topic_names = {tid: name for name, tid in st.topics.items()}
        added = st.files.keys() - self._indexed_files
        from_scratch = not self._indexed_files or bool(self._indexed_files - st.files.keys())
        named = st.files if from_scratch else added
        hours = [parse_hour_name(rel[6:16]) for rel in named if _is_hour_index(rel)]
        hours = sorted(hours if from_scratch else self._hours + hours)
        if from_scratch or any(rel.startswith("ready/") for rel in added):
            ready_segs = ready_segments(st.files)
        else:
            ready_segs = self._ready_segs
        # all read before any is kept: a name that fails to parse leaves the last names whole
        self._hours, self._ready_segs, self._indexed_files = hours, ready_segs, set(st.files)
        if from_scratch:
            for rel in [rel for rel in self._ready_verified if rel not in st.files]:
                del self._ready_verified[rel]
        retained_from = self.meta("retained_from_hour", 0)
        for hour in [h for h in self._buckets if h < retained_from and not self._in_batch()]:
            self._buckets.pop(hour).close(save_heads=False)
            self._with_files.pop(hour, None)

    # -- state ----------------------------------------------------------------

    @property
    def applied_index(self) -> int:
        return self._state().applied_index

    def meta(self, key: str, default: Any = None) -> Any:
        return self._state().meta.get(key, default)

    def meta_keys(self) -> list[str]:
        return sorted(self._state().meta)

    def file_lengths(self) -> Mapping[str, int]:
        """The committed length of every file the journal names."""
        return self._state().files

    @property
    def sealed_before_hour(self) -> int:
        return self.meta("sealed_before_hour", 0)

    def topics(self) -> dict[str, int]:
        return dict(self._state().topics)

    def topic_id(self, name: str) -> int | None:
        return self._state().topics.get(name)

    def topic_name(self, tid: int) -> str:
        return self._topic_names[tid]

    def hours(self) -> list[int]:
        """Hours that hold messages, ascending."""
        return list(self._hours)

    # -- hour buckets -----------------------------------------------------------

    def bucket(self, hour: int) -> HourBucket:
        b = self._buckets.get(hour)
        if b is None:
            b = self._buckets[hour] = HourBucket(self.files, hour)
            b.set_mapped(hour in self._mapped)
        else:
            self._buckets.move_to_end(hour)
        self._with_files[hour] = None
        self._with_files.move_to_end(hour)
        if not self._in_batch():
            self._evict()
        return b

    def _evict(self) -> None:
        """Trim both LRUs; never during a batch, whose files must stay open until commit."""
        cfg = self.config
        for tier, limit in ((self._with_files, cfg.max_open_hours), (self._buckets, cfg.max_cached_hours)):
            excess = len(tier) - limit
            for hour in list(tier):
                if excess <= 0:
                    break
                if hour in self._mapped:
                    continue
                if tier is self._buckets:
                    tier.pop(hour).close(save_heads=not self.read_only)
                    self._with_files.pop(hour, None)
                else:
                    tier.pop(hour)
                    if hour in self._buckets:
                        self._buckets[hour].close_files()
                excess -= 1

    def _close_buckets(self) -> None:
        for b in self._buckets.values():
            b.close(save_heads=not self.read_only)
        self._buckets.clear()
        self._with_files.clear()

    def map_hours(self, hours: Iterable[int]) -> None:
        """Read these hours through mmap (the current and next delivery hours); unmap the rest."""
        wanted = set(hours)
        for hour in self._mapped - wanted:
            if hour in self._buckets:
                self._buckets[hour].set_mapped(False)
        self._mapped = wanted
        for hour in wanted:
            self.bucket(hour).set_mapped(True)

    def mapped_hours(self) -> set[int]:
        return set(self._mapped)

    def hour_census(
        self, hour: int, topic_id: int | None = None, after: tuple[int, int] | None = None
    ) -> np.ndarray:
        """:meth:`HourBucket.census` of an hour (3,600 counts); :meth:`hour_live_count`
        for its total. An hour not cached is read without joining the cache, so a census
        of many hours leaves no heads or bitmaps behind."""
        with self._census_bucket(hour) as b:
            return b.census(topic_id, after)

    def hour_live_keys(
        self, hour: int, topic_id: int | None, after: tuple[int, int], stop_ms: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`HourBucket.live_keys` of an hour, read as :meth:`hour_census` reads."""
        with self._census_bucket(hour) as b:
            return b.live_keys(topic_id, after, stop_ms)

    def hour_entries(self, hour: int) -> int:
        """Messages stored in an hour (its index's committed entries), from the state alone."""
        return INDEX.count_in(self._state().files.get(f"delay/{hour_name(hour)}.idx", 0))

    def hour_live_count(self, hour: int) -> int:
        with self._census_bucket(hour) as b:
            return b.live_count()

    @contextmanager
    def _census_bucket(self, hour: int) -> Iterator[HourBucket]:
        cached = self._buckets.get(hour)
        b = cached or HourBucket(self.files, hour)
        try:
            yield b
        finally:
            if cached is None and not self._in_batch():
                b.close_files()

    # -- messages ---------------------------------------------------------------

    def _check_retained(self, mid: MessageId) -> None:
        if mid.hour < self.meta("retained_from_hour", 0):
            raise MessageExpiredError(f"message {mid} was removed by retention")

    # A reader may hold a state published before retention unlinked a file it names;
    # names are never reused, so a missing file means "removed since", never other bytes.

    def read_message(self, mid: MessageId) -> StoredMessage:
        self._check_retained(mid)
        with _removed_as(MessageExpiredError(f"message {mid} was removed by retention")):
            return self.bucket(mid.hour).read_message(mid.global_index)

    def read_messages(self, mids: list[MessageId]) -> list[StoredMessage]:
        """``read_message`` of each, in that order, reading each hour's together."""
        return self._per_hour(mids, functools.partial(self._read_hour, read=HourBucket.read_messages))

    def read_records(self, mids: list[MessageId]) -> list[bytes]:
        """The checked delay-log records of ``mids`` (HourBucket.read_records), in that
        order, reading each hour's together."""
        return self._per_hour(mids, functools.partial(self._read_hour, read=HourBucket.read_records))

    def read_records_at(self, hours: np.ndarray, gis: np.ndarray) -> list[bytes]:
        """:meth:`read_records` of the messages ``hours``/``gis`` (arrays of one length),
        without a MessageId each: a pull's, read from its ready-log rows. Those a reader
        keeps (recent_records.py) are taken from memory, the others read."""
        if not len(hours):
            return []
        hours = np.asarray(hours, dtype=np.int64)
        k = int(np.argmin(hours))
        self._check_retained(MessageId(int(hours[k]), int(gis[k])))  # the oldest hour's
        first = int(hours[0])
        if (hours == first).all():  # a pull's rows mostly come from one hour
            return self._records_of_hour(first, np.asarray(gis).tolist())
        mids = list(map(MessageId, hours.tolist(), np.asarray(gis).tolist()))
        return self._per_hour(mids, self._records_of_hour)

    def _records_of_hour(self, hour: int, gis: list[int]) -> list:
        """HourBucket.read_records of ``gis``: those a reader keeps taken from memory, the
        others read from the log."""
        kept = None if self._recent is None else self._recent.take(hour, gis)
        if kept is None:
            return self._read_hour(hour, gis, HourBucket.read_records)
        missing = [k for k, record in enumerate(kept) if record is None]
        if missing:
            read = self._read_hour(hour, [gis[k] for k in missing], HourBucket.read_records)
            for k, record in zip(missing, read, strict=True):
                kept[k] = record
        return kept

    def _read_hour(self, hour: int, gis: list[int], read: Callable[[HourBucket, list[int]], list]) -> list:
        with _removed_as(MessageExpiredError(f"messages of hour {hour} were removed by retention")):
            return read(self.bucket(hour), gis)

    def _per_hour(self, mids: list[MessageId], read_hour: Callable[[int, list[int]], list]) -> list:
        """``read_hour(hour, gis)`` of each hour's messages of ``mids``, put back in their order."""
        for mid in mids:
            self._check_retained(mid)
        out: list = [None] * len(mids)
        for hour, ks in by_hour(mids).items():
            got = read_hour(hour, [mids[k].global_index for k in ks])
            for k, m in zip(ks, got, strict=True):
                out[k] = m
        return out

    def current_place(self, mid: MessageId) -> MessageId:
        """Where message ``mid`` lives now: its own place, or its copy's once rescheduled
        (moves). Read even past retention: the link outlives its hour while the copy lives."""
        return self.current_places([mid])[0]

    def current_places(self, mids: list[MessageId | None]) -> list[MessageId | None]:
        """:meth:`current_place` of each (None for None), each hour's links read once."""
        return self._linked(mids, HourBucket.moved_to)

    def original_ids(self, mids: list[MessageId | None]) -> list[MessageId | None]:
        """:meth:`original_id` of each (None for None), each hour's links read once."""
        return self._linked(mids, HourBucket.copy_of)

    def _linked(
        self, mids: list[MessageId | None], link: Callable[[HourBucket, int], MessageId | None]
    ) -> list[MessageId | None]:
        out = list(mids)
        for hour, ks in by_hour(mids).items():
            with _removed_as(MessageExpiredError(f"messages of hour {hour} were removed by retention")):
                b = self.bucket(hour)
                for k in ks:
                    out[k] = link(b, mids[k].global_index) or mids[k]
        return out

    def original_id(self, mid: MessageId) -> MessageId:
        """The id message ``mid`` answers to: its own, or its original's if it is a copy."""
        return self.original_ids([mid])[0]

    def late_outcome(self, mid: MessageId) -> tuple[int, int] | None:
        """(DROPPED or DEAD_LETTERED, ms late) once ``mid`` fell due too late (late_policies)."""
        self._check_retained(mid)
        with _removed_as(MessageExpiredError(f"message {mid} was removed by retention")):
            return self.bucket(mid.hour).late_outcome(mid.global_index)

    def index_entry(self, mid: MessageId) -> np.void:
        self._check_retained(mid)
        with _removed_as(MessageExpiredError(f"message {mid} was removed by retention")):
            return self.bucket(mid.hour).entry(mid.global_index)

    def index_entries(self, hour: int, gis: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For messages ``gis`` of ``hour``, read together: their index entries, whether
        each is stored (a globalIndex past the hour's end names none; its row is zeros),
        and whether each is cancelled. MessageExpiredError once retention removed the hour."""
        expired = MessageExpiredError(f"messages of hour {hour} were removed by retention")
        if hour < self.meta("retained_from_hour", 0):
            raise expired
        with _removed_as(expired):
            b = self.bucket(hour)
            want = np.asarray(gis, dtype=np.int64)
            stored = (want >= 0) & (want < b.count)
            rows = np.zeros(len(want), dtype=INDEX.dtype)
            rows[stored] = b.entries(want[stored].tolist())
            cancelled = np.zeros(len(want), dtype=bool)
            cancelled[stored] = b.cancelled_mask()[want[stored]]
            return rows, stored, cancelled

    def is_cancelled(self, mid: MessageId) -> bool:
        self._check_retained(mid)
        with _removed_as(MessageExpiredError(f"message {mid} was removed by retention")):
            return self.bucket(mid.hour).is_cancelled(mid.global_index)

    # -- ready logs -------------------------------------------------------------

    def ready_log(self, topic: str) -> SegmentedLog | None:
        """The committed segments of a topic's ready log, or None for an unknown topic."""
        tid = self.topic_id(topic)
        if tid is None:
            return None
        return SegmentedLog(
            self.files,
            READY,
            READY_LOG,
            self._ready_segs.get(tid, []),
            self.meta(base_key(tid), 0),
            lambda first: ready_segment_rel(tid, first),
        )

    def ready_base(self, topic: str) -> int:
        """The first offset the topic's ready log still holds: retention removed those below."""
        tid = self.topic_id(topic)
        return 0 if tid is None else self.meta(base_key(tid), 0)

    def ready_count(self, topic: str) -> int:
        """The offset the next delivered message of the topic gets (trimmed ones included)."""
        log = self.ready_log(topic)
        return 0 if log is None else log.end

    def ready_floor(self, rel: str) -> int:
        """The lowest hour the entries of a ready segment name (0 when unknown: older stores)."""
        return self.meta(floor_key(rel), 0)

    def read_ready(self, topic: str, start: int | None = None, stop: int | None = None) -> np.ndarray:
        """Ready-log entries ``start .. stop-1`` (read-only), each checksum verified.

        ``start`` defaults to the base; below it, :class:`ReadyTrimmedError`. Reads and
        verifies only that range, so the first read of a long log after start costs what
        it reads; an entry once verified is not verified again (consumers read a log's tail
        over and over)."""
        log = self.ready_log(topic)
        if log is None:
            return np.empty(0, dtype=READY.dtype)
        start = log.base if start is None else start
        if start < log.base:
            raise ReadyTrimmedError(topic, start, log.base)
        n = log.end
        stop = n if stop is None else min(stop, n)
        start = min(start, stop)
        with _removed_as(ReadyTrimmedError(topic, start, log.base)):
            return log.read(start, stop, self._ready_verified_from, self._mark_ready_verified)

    def _ready_verified_from(self, rel: str, lo: int, hi: int) -> int:
        """The first of positions ``lo .. hi-1`` of segment ``rel`` not verified yet (``hi``: none)."""
        ranges = self._ready_verified.get(rel)
        if ranges is None:
            self.ready_log_magic(rel)
            ranges = self._ready_verified[rel] = []
        for a, b in ranges:
            if a <= lo < b:
                return min(b, hi)
        return lo

    def _mark_ready_verified(self, rel: str, lo: int, hi: int) -> None:
        ranges = sorted([*self._ready_verified.setdefault(rel, []), (lo, hi)])
        merged = [ranges[0]]
        for a, b in ranges[1:]:
            if a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        self._ready_verified[rel] = merged

    def forget_verified(self) -> None:
        """Entries may have been cut back (a batch rolled back): verify them again."""
        self._ready_verified.clear()

    def ready_log_magic(self, rel: str) -> None:
        f = self.files.get(rel)
        check_magic(f.read(0, MAGIC_SIZE), READY_LOG, f.path)


@contextmanager
def _removed_as(error: Exception) -> Iterator[None]:
    """Raise ``error`` for a file that retention removed after the state being read."""
    try:
        yield
    except FileNotFoundError as e:
        raise error from e


def _is_hour_index(rel: str) -> bool:
    """Whether ``rel`` is an hour's delay index (``delay/YYYYMMDDHH.idx``): one per hour."""
    return rel.startswith("delay/") and rel.endswith(".idx")
