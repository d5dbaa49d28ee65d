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

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .config import StorageConfig
from .errors import MessageExpiredError
from .file_table import FileTable
from .hour_bucket import HourBucket
from .hour_names import parse_hour_name
from .magic import MAGIC_SIZE, READY_LOG, check_magic
from .message import StoredMessage
from .message_id import MessageId
from .ready_log import READY

READY_VERIFY_CHUNK = 65_536  # ready entries whose checksums are remembered as verified together


@dataclass(frozen=True)
class CommittedState:
    """What one applied batch left committed, as the writer publishes it to readers.

    ``files``, ``topics`` and ``meta`` are the writer's copies at that batch, never
    changed afterwards. ``generation`` changes when the store's files were replaced
    whole (a snapshot installed); ``names_version`` when topics or hours were added or
    removed.
    """

    applied_index: int
    files: Mapping[str, int]
    topics: Mapping[str, int]
    meta: Mapping[str, Any]
    generation: int
    names_version: int


class StoreReads:
    directory: str
    config: StorageConfig
    read_only: bool
    files: FileTable

    def _state(self) -> CommittedState:
        raise NotImplementedError

    def _in_batch(self) -> bool:
        """True while a batch is open: its files must stay open until it commits."""
        return False

    def _init_reads(self) -> None:
        self._buckets: OrderedDict[int, HourBucket] = OrderedDict()  # LRU: heads in memory
        self._with_files: OrderedDict[int, None] = OrderedDict()  # LRU: buckets with open fds
        self._mapped: set[int] = set()
        self._ready_verified: dict[int, set[int]] = {}  # topic id -> verified chunks
        self._reindex_names()

    def _reindex_names(self) -> None:
        st = self._state()
        self._topic_names = {tid: name for name, tid in st.topics.items()}
        self._hours = sorted(
            parse_hour_name(rel[6:16])
            for rel in st.files
            if rel.startswith("delay/") and rel.endswith(".idx")
        )

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

    # -- messages ---------------------------------------------------------------

    def _check_retained(self, mid: MessageId) -> None:
        if mid.hour < self.meta("retained_from_hour", 0):
            raise MessageExpiredError(f"message {mid} was removed by retention")

    def read_message(self, mid: MessageId) -> StoredMessage:
        self._check_retained(mid)
        return self.bucket(mid.hour).read_message(mid.global_index)

    def index_entry(self, mid: MessageId) -> np.void:
        self._check_retained(mid)
        return self.bucket(mid.hour).entry(mid.global_index)

    def is_cancelled(self, mid: MessageId) -> bool:
        self._check_retained(mid)
        return self.bucket(mid.hour).is_cancelled(mid.global_index)

    # -- ready logs -------------------------------------------------------------

    def ready_file(self, topic: str):
        tid = self.topic_id(topic)
        return None if tid is None else self.files.get(f"ready/{tid}.rdy")

    def ready_count(self, topic: str) -> int:
        f = self.ready_file(topic)
        return 0 if f is None else READY.count_in(f.length)

    def read_ready(self, topic: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Ready-log entries ``start .. stop-1`` (read-only), each checksum verified.

        Reads and verifies only that range, so the first read of a long log after start
        costs what it reads; a whole chunk of ``READY_VERIFY_CHUNK`` entries, once read,
        is not verified again."""
        f = self.ready_file(topic)
        if f is None:
            return np.empty(0, dtype=READY.dtype)
        n = READY.count_in(f.length)
        stop = n if stop is None else min(stop, n)
        start = min(start, stop)
        tid = self.topic_id(topic)
        done = self._ready_verified.get(tid)
        if done is None:
            check_magic(f.read(0, MAGIC_SIZE), READY_LOG, f.path)
            done = self._ready_verified[tid] = set()
        chunk = READY_VERIFY_CHUNK
        todo = [c for c in range(start // chunk, -(-stop // chunk)) if c not in done]
        rows = READY.read(f, start, stop, start if todo else stop)
        done.update(c for c in todo if start <= c * chunk and (c + 1) * chunk <= stop)
        return rows
