"""The storage engine: hour-bucket delay logs and indexes, ready logs, key window.

Layout of a data directory (each file's format is in the named module)::

    commits.log              commit journal: the commit point of every batch   commit_journal
    delay/<hour>.log|.idx    delay log and index of one delivery hour          hour_bucket
    delay/<hour>.tomb        cancel tombstones of that hour                    tombstones
    delay/<hour>.heads       per-second chain heads, a rebuildable cache       heads
    ready/<topic_id>.rdy     delivered messages of one topic                   ready_log
    keys/<hour>.keys         producer keys by produced hour                    key_window
    torn/                    torn tails and uncommitted files set aside on open

Every write happens inside :meth:`Storage.apply`, which carries the Raft index: an
index at or below the applied one is a no-op, so replaying the Raft journal after a
restart is safe, and nodes fed the same batches hold byte-identical files. The engine
never reads a clock and starts no threads.
"""

from __future__ import annotations

import os
import shutil
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import msgpack
import numpy as np

from .check import check_store
from .commit_journal import CommitJournal
from .config import StorageConfig
from .errors import CorruptLogError, MessageExpiredError, StorageError
from .file_table import FileTable
from .framing import committed_frames
from .hour_bucket import HourBucket
from .hour_names import parse_hour_name
from .key_window import KeyWindow, key_file
from .magic import KEY_LOG, MAGIC_SIZE, READY_LOG, check_magic
from .message import StoredMessage
from .message_id import MessageId
from .ready_log import READY
from .transaction import Transaction

T = TypeVar("T")

DATA_DIRS = ("delay", "ready", "keys")
TORN_DIR = "torn"
READY_VERIFY_CHUNK = 65_536  # ready entries whose checksums are remembered as verified together


class Skipped:
    """What :meth:`Storage.apply` returns for a Raft index that was already applied."""

    def __repr__(self) -> str:
        return "SKIPPED"


SKIPPED = Skipped()


def _hour_of(rel: str) -> int | None:
    """The hour of a ``delay/<hour>.*`` or ``keys/<hour>.keys`` path, else None."""
    head, _, name = rel.partition("/")
    if head not in ("delay", "keys"):
        return None
    return parse_hour_name(name.split(".", 1)[0])


class Storage:
    def __init__(
        self, directory: str, config: StorageConfig | None = None, *, read_only: bool = False
    ) -> None:
        """Open (or create) a store. ``read_only`` opens a store that a running node may be
        writing: nothing is set aside, cached or written, and bytes past a commit are ignored."""
        self.directory = os.path.abspath(directory)
        self.config = config or StorageConfig()
        self.read_only = read_only
        if not read_only:
            os.makedirs(self.directory, exist_ok=True)
        self._open()

    # -- open and recovery ----------------------------------------------------

    def _open(self) -> None:
        self.recovered: list[str] = []  # what open set aside, for the operator's log
        self.journal = CommitJournal(self.directory, self.config.journal_compact_bytes)
        self.journal.open(self.read_only)
        if self.journal.torn_tail and not self.read_only:
            at, n = self.journal.torn_tail
            self.recovered.append(f"commits.log: set aside a torn tail of {n} bytes at {at}")
        self._recover_files()
        self.files = FileTable(self.directory, self.journal.state.files)
        self._buckets: OrderedDict[int, HourBucket] = OrderedDict()  # LRU: heads in memory
        self._with_files: OrderedDict[int, None] = OrderedDict()  # LRU: buckets with open fds
        self._mapped: set[int] = set()
        self._ready_verified: dict[int, set[int]] = {}  # topic id -> verified chunks
        self._tx: Transaction | None = None
        self._reindex_names()
        self._load_keys()

    def _set_aside(self, rel: str, start: int) -> None:
        src = os.path.join(self.directory, rel)
        torn = os.path.join(self.directory, TORN_DIR)
        os.makedirs(torn, exist_ok=True)
        dst = os.path.join(torn, f"{rel.replace('/', '_')}.{start}")
        with open(src, "rb") as f:
            f.seek(start)
            tail = f.read()
        with open(dst, "wb") as f:
            f.write(tail)
            f.flush()
            os.fsync(f.fileno())
        if start == 0:
            os.unlink(src)
        else:
            os.truncate(src, start)
        self.recovered.append(f"{rel}: set aside {len(tail)} uncommitted bytes at {start}")

    def _recover_files(self) -> None:
        committed = self.journal.state.files
        for rel, length in sorted(committed.items()):
            path = os.path.join(self.directory, rel)
            size = os.path.getsize(path) if os.path.exists(path) else -1
            if size < length:
                raise CorruptLogError(
                    path, max(size, 0), f"file holds {max(size, 0)} bytes; {length} were committed"
                )
            if size > length and not self.read_only:
                self._set_aside(rel, length)
        if self.read_only:
            return
        for d in DATA_DIRS:
            full = os.path.join(self.directory, d)
            if not os.path.isdir(full):
                continue
            for name in sorted(os.listdir(full)):
                rel = f"{d}/{name}"
                if name.endswith(".tmp"):
                    os.unlink(os.path.join(full, name))
                elif rel not in committed and not name.endswith(".heads"):
                    self._set_aside(rel, 0)

    def _reindex_names(self) -> None:
        st = self.journal.state
        self._topic_names = {tid: name for name, tid in st.topics.items()}
        self._hours = sorted(
            parse_hour_name(rel[6:16])
            for rel in st.files
            if rel.startswith("delay/") and rel.endswith(".idx")
        )

    def _load_keys(self) -> None:
        self.keys = KeyWindow(self.config.key_window_ms, self.config.max_keys)
        for hour in self.key_file_hours():
            f = self.files.get(key_file(hour))
            buf = f.buffer()
            check_magic(bytes(buf[:MAGIC_SIZE]), KEY_LOG, f.path)
            for _, payload in committed_frames(buf, MAGIC_SIZE, f.path):
                topic, key, mid, produced_at = msgpack.unpackb(payload, raw=False)
                self.keys.add(topic, key, MessageId.parse(mid), produced_at)

    # -- state ----------------------------------------------------------------

    @property
    def applied_index(self) -> int:
        return self.journal.state.applied_index

    def meta(self, key: str, default: Any = None) -> Any:
        return self.journal.state.meta.get(key, default)

    @property
    def sealed_before_hour(self) -> int:
        return self.meta("sealed_before_hour", 0)

    def topics(self) -> dict[str, int]:
        return dict(self.journal.state.topics)

    def topic_id(self, name: str) -> int | None:
        return self.journal.state.topics.get(name)

    def topic_name(self, tid: int) -> str:
        return self._topic_names[tid]

    def hours(self) -> list[int]:
        """Hours that hold messages, ascending."""
        return list(self._hours)

    def key_file_hours(self) -> list[int]:
        return sorted(
            parse_hour_name(rel[5:15]) for rel in self.journal.state.files if rel.startswith("keys/")
        )

    # -- writes ---------------------------------------------------------------

    def apply(self, raft_index: int, fn: Callable[[Transaction], T]) -> T | Skipped:
        """Run ``fn(tx)`` as the batch of ``raft_index``, committed whole or not at all.

        Returns :data:`SKIPPED` without calling ``fn`` when the index was applied already.
        """
        if self.read_only:
            raise StorageError("this store was opened read-only")
        if raft_index <= self.applied_index:
            return SKIPPED
        if self._tx is not None:
            raise StorageError("apply() is not reentrant")
        tx = self._tx = Transaction(self, raft_index)
        try:
            result = fn(tx)
            # Durability rule: data bytes reach the disk before the journal frame that
            # names them, so the journal never points at bytes a crash could lose.
            if self.config.fsync:
                self.files.sync()
            record = {
                "ri": raft_index,
                "files": self.files.pending_lengths(),
                "removed": self.files.pending_removals(),
                "topics": tx.topics,
                "meta": tx.meta,
            }
            self.journal.append(record, fsync=self.config.fsync)
        except BaseException:
            self._rollback(tx)
            raise
        finally:
            self._tx = None
        names_changed = bool(tx.topics or tx.dropped_hours) or any(
            rel.endswith(".idx") for rel in self.files.created_in_batch()
        )
        self.files.commit()
        for hour in tx.dropped_hours:
            self._with_files.pop(hour, None)
            self._buckets.pop(hour, HourBucket(self.files, hour)).remove_cache_files()
        if names_changed:
            self._reindex_names()
        self._evict()
        return result

    def _rollback(self, tx: Transaction) -> None:
        self.files.rollback()
        for hour in tx.buckets_touched | tx.dropped_hours:
            bucket = self._buckets.pop(hour, None)
            self._with_files.pop(hour, None)
            if bucket is not None:
                bucket.forget()
        self._load_keys()
        self._evict()

    def drop_bucket(self, hour: int) -> None:
        bucket = self.bucket(hour)
        for rel in (bucket.log_rel, bucket.idx_rel, bucket.tomb_rel):
            self.files.remove(rel)
        assert self._tx is not None
        self._tx.dropped_hours.add(hour)

    # -- reads ----------------------------------------------------------------

    def bucket(self, hour: int) -> HourBucket:
        b = self._buckets.get(hour)
        if b is None:
            b = self._buckets[hour] = HourBucket(self.files, hour)
            b.set_mapped(hour in self._mapped)
        else:
            self._buckets.move_to_end(hour)
        self._with_files[hour] = None
        self._with_files.move_to_end(hour)
        if self._tx is None:
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

    def lookup_key(self, topic: str, key: str) -> MessageId | None:
        return self.keys.get(topic, key)

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

    # -- snapshots ------------------------------------------------------------

    def snapshot(self, dest: str) -> list[str]:
        """Write a self-contained copy of the committed state into the new folder ``dest``.

        Every file the journal names is append-only (a failed batch only cuts back what it
        appended), so each is hard-linked: the bytes up to its committed length never
        change, and the checkpoint written here names those lengths. That makes a snapshot
        O(files), not O(bytes), under the apply lock. The folder shares inodes with this
        store: ship it or open it read-only; :meth:`restore` copies the committed prefixes.
        Returns the relative paths written.
        """
        if self._tx is not None:
            raise StorageError("snapshot() inside apply()")
        for b in self._buckets.values():
            b.save_heads()
        state = self.journal.state
        written = _materialize(self.directory, dest, state.files, self.sealed_before_hour, link_all=True)
        self.journal.write_checkpoint(state, directory=dest)
        return written

    def restore(self, src: str) -> None:
        """Replace this store's contents with the snapshot in ``src`` and reopen."""
        if self._tx is not None:
            raise StorageError("restore() inside apply()")
        probe = CommitJournal(src, self.config.journal_compact_bytes)
        probe.open()
        probe.close()
        sealed = probe.state.meta.get("sealed_before_hour", 0)
        self.close()
        staging = self.directory + ".restoring"
        shutil.rmtree(staging, ignore_errors=True)
        _materialize(src, staging, probe.state.files, sealed)
        probe.write_checkpoint(probe.state, directory=staging)
        old = self.directory + ".replaced"
        shutil.rmtree(old, ignore_errors=True)
        os.rename(self.directory, old)
        os.rename(staging, self.directory)
        shutil.rmtree(old)
        self._open()

    # -- lifecycle ------------------------------------------------------------

    def check(self, on_hour: Callable[[int], None] | None = None):
        """Verify every invariant of the committed state; raises CorruptLogError on the first
        break. ``on_hour`` is called after each hour is verified (for progress displays)."""
        return check_store(self, on_hour)

    def close(self) -> None:
        for b in self._buckets.values():
            b.close(save_heads=not self.read_only)
        self._buckets.clear()
        self._with_files.clear()
        self.files.close_all()
        self.journal.close()

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _materialize(
    src: str, dest: str, files: dict[str, int], sealed_before_hour: int, link_all: bool = False
) -> list[str]:
    """Copy committed files from ``src`` to the new folder ``dest``; hard-link sealed ones
    whole, or with ``link_all`` every file (see :meth:`Storage.snapshot`)."""
    os.makedirs(dest, exist_ok=False)
    written = []
    for rel, length in sorted(files.items()):
        s, d = os.path.join(src, rel), os.path.join(dest, rel)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        sealed = rel.startswith("delay/") and _hour_of(rel) < sealed_before_hour
        if link_all or (sealed and os.path.getsize(s) == length):
            try:
                os.link(s, d)
            except OSError:
                shutil.copyfile(s, d)
        else:
            _copy_prefix(s, d, length)
        written.append(rel)
        if rel.endswith(".idx"):
            heads = s[: -len(".idx")] + ".heads"
            if os.path.exists(heads):
                shutil.copyfile(heads, d[: -len(".idx")] + ".heads")
    return written


def _copy_prefix(src: str, dst: str, length: int) -> None:
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        left = length
        while left:
            chunk = fi.read(min(left, 1 << 20))
            if not chunk:
                raise CorruptLogError(src, length - left, "file ended before its committed length")
            fo.write(chunk)
            left -= len(chunk)
        fo.flush()
        os.fsync(fo.fileno())
