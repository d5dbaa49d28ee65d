"""The storage engine: hour-bucket delay logs and indexes, ready logs, key index.

Layout of a data directory (each file's format is in the named module)::

    commits.log                  commit journal: the commit point of every batch   commit_journal
    delay/<hour>.log|.idx        delay log and index of one delivery hour          hour_bucket
    delay/<hour>.tomb            cancel tombstones of that hour                    tombstones
    delay/<hour>.move            reschedules: where a message went, whose copy     moves
    delay/<hour>.late            lateness policies, and what a late one became     late_policies
    delay/<hour>.heads           per-second chain heads, a rebuildable cache       heads
    ready/<topic_id>.<first>.rdy a segment of one topic's delivered messages       ready_log
    keys/index.<first>.kix       a segment of the producer-key index               key_index
    keys/index.heads             the key index's chain heads, a rebuildable cache  key_heads
    torn/                        torn tails and uncommitted files set aside on open

Every write happens inside :meth:`Storage.apply`, which carries the Raft index: an
index at or below the applied one is a no-op, so replaying the Raft journal after a
restart is safe, and nodes fed the same batches hold byte-identical data files (and
journals that fold to the same state: where their sync points fall differs). The engine
never reads a clock and starts no threads.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from types import MappingProxyType
from typing import Any, TypeVar

from .commit_journal import CommitJournal, JournalState
from .config import StorageConfig
from .durable import fsync, fsync_dir, fsync_file
from .errors import CorruptLogError, StorageError
from .file_table import FileTable
from .hour_bucket import HourBucket
from .hour_names import parse_hour_name
from .key_heads import HEADS_NAME as KEY_HEADS_NAME
from .key_index import KeyIndex
from .message_id import MessageId
from .recent_records import WrittenRecords
from .store_reads import CommittedState, StoreReads
from .transaction import Transaction

T = TypeVar("T")

DATA_DIRS = ("delay", "ready", "keys")
TORN_DIR = "torn"
RESTORING_DIR = ".restoring"  # restore()'s staged copy of a snapshot
RESTORED_MARKER = "RESTORED"  # in it once the copy is whole and durable
OLD_ASIDE_MARKER = "OLD_ASIDE"  # in it once the old entries went aside into REPLACED_DIR
REPLACED_DIR = ".replaced"  # the old entries, until the staged ones are in place
BACKUP_DIR = ".backup"  # link_for_backup()'s snapshots, while a backup reads them
# A read-only open reads commits.log again this often in all when a file it names is gone
# (removed by the node writing the store, between the read and the look).
READ_ONLY_TRIES = 3


class Skipped:
    """What :meth:`Storage.apply` returns for a Raft index that was already applied."""

    def __repr__(self) -> str:
        return "SKIPPED"


SKIPPED = Skipped()


def _hour_of(rel: str) -> int | None:
    """The hour of a ``delay/<hour>.*`` path, else None."""
    head, _, name = rel.partition("/")
    if head != "delay":
        return None
    return parse_hour_name(name.split(".", 1)[0])


class Storage(StoreReads):
    def __init__(
        self, directory: str, config: StorageConfig | None = None, *, read_only: bool = False
    ) -> None:
        """Open (or create) a store. ``read_only`` opens a store that a running node may be
        writing: nothing is set aside, cached or written, bytes past a commit are ignored, and a
        file removed as it opens is looked for in commits.log again (:meth:`_open_journal`)."""
        self.directory = os.path.abspath(directory)
        self.config = config or StorageConfig()
        self.read_only = read_only
        if not read_only:
            os.makedirs(self.directory, exist_ok=True)
            # What backups a stop cut short left: links that hold disk space. Not in _open:
            # a restore (a snapshot installed) reopens while a backup may be sending them.
            shutil.rmtree(os.path.join(self.directory, BACKUP_DIR), ignore_errors=True)
        self._open()

    # -- open and recovery ----------------------------------------------------

    def _open(self) -> None:
        self.recovered: list[str] = []  # what open set aside, for the operator's log
        staging = os.path.join(self.directory, RESTORING_DIR)
        if os.path.isdir(staging) and not self.read_only:
            # A restore was cut short: finish it once its copy was whole, else drop the copy
            # (the store was not touched before the copy was whole).
            if os.path.exists(os.path.join(staging, RESTORED_MARKER)):
                _swap_in(self.directory, staging)
                self.recovered.append("finished a restore from a snapshot that a stop cut short")
            else:
                shutil.rmtree(staging)
        shutil.rmtree(os.path.join(self.directory, REPLACED_DIR), ignore_errors=True)
        self._open_journal()
        self._unsynced_bytes = self._unsynced_batches = 0
        self.files = FileTable(self.directory, self.journal.state.files, self.config.max_open_files)
        self._tx: Transaction | None = None
        self.generation = getattr(self, "generation", -1) + 1  # a new one per open or restore
        self._written: list[WrittenRecords] = []  # the last batch's records of messages due soon
        self.names_version = 0
        self._init_reads()
        self.key_index = KeyIndex(
            self.files,
            self.config,
            self.journal.state.meta,
            self.read_message,
            lambda mid: self.current_place(self.original_id(mid)).hour,
        )

    def _open_journal(self) -> None:
        """Read commits.log, and check the files it names against it. Read-only, beside a
        node that writes the store, a file it names may be removed between the two (a trim,
        an hour cut): commits.log is read again, and only a file it still names is missing."""
        said = len(self.recovered)
        for tries_left in range(READ_ONLY_TRIES - 1, -1, -1):
            del self.recovered[said:]
            self.journal = CommitJournal(self.directory, self.config.journal_compact_bytes)
            self.journal.open(self.read_only)
            self._say_journal_recovery()
            try:
                self._recover_files()
                return
            except CorruptLogError:
                if not self.read_only or not tries_left:
                    raise

    def _say_journal_recovery(self) -> None:
        if self.journal.lost_at is not None:
            self.recovered.append(
                f"commits.log: writes lost at {self.journal.lost_at}, past the last sync point, with later "
                "ones on disk (a power cut keeps unsynced pages in no order)"
            )
        if self.journal.torn_tail and not self.read_only:
            at, n = self.journal.torn_tail
            self.recovered.append(f"commits.log: set aside a torn tail of {n} bytes at {at}")
        back = self.journal.rolled_back
        if back is not None:
            self.recovered.append(
                f"commits.log: back at the last sync point, index {self.journal.state.applied_index}: "
                f"{back.frames} unsynced batch(es) up to index {back.last_index} dropped; "
                "the Raft log replays them"
            )

    def _set_aside(self, rel: str, start: int) -> None:
        """Move what is past ``start`` of ``rel`` into ``torn/``: a whole file by a rename
        (one a removal's unlink left behind is an hour's log, gigabytes), a tail by a copy."""
        src = os.path.join(self.directory, rel)
        torn = os.path.join(self.directory, TORN_DIR)
        os.makedirs(torn, exist_ok=True)
        dst = os.path.join(torn, f"{rel.replace('/', '_')}.{start}")
        if start == 0:
            size = os.path.getsize(src)
            os.replace(src, dst)
            fsync_dir(torn)
            fsync_dir(os.path.dirname(src))
        else:
            with open(src, "rb") as f:
                f.seek(start)
                tail = f.read()
            with open(dst, "wb") as f:
                f.write(tail)
                f.flush()
                fsync(f.fileno(), dst)
            os.truncate(src, start)
            size = len(tail)
        self.recovered.append(f"{rel}: set aside {size} uncommitted bytes at {start}")

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
                self._cut_back(rel, length)
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
                    self._cut_back(rel, 0)

    def _cut_back(self, rel: str, length: int) -> None:
        """Bytes past what the kept state names: an unsynced batch's are only cut (the Raft
        log replays it), anything else is set aside for a look."""
        back = self.journal.rolled_back
        if back is None or rel not in back.files:
            self._set_aside(rel, length)
            return
        path = os.path.join(self.directory, rel)
        if length == 0:
            os.unlink(path)
        else:
            os.truncate(path, length)

    # -- state ----------------------------------------------------------------

    def _state(self) -> JournalState:
        return self.journal.state

    def _in_batch(self) -> bool:
        return self._tx is not None

    def current_meta(self, key: str, default: Any = None) -> Any:
        """A meta value as the open batch has left it so far (committed, outside a batch)."""
        tx = self._tx
        if tx is not None:
            return tx.current_meta(key, default)
        return self.meta(key, default)

    def meta_keys(self) -> list[str]:
        """Every meta key, as the open batch has left them so far."""
        if self._tx is not None:
            return self._tx.meta_keys()
        return super().meta_keys()

    def published(self) -> CommittedState:
        """The committed state as it is now, for readers on other threads (StoreReader).
        The records of messages due soon that the last batch wrote ride along, once
        (recent_records.py)."""
        st = self.journal.state
        written, self._written = tuple(self._written), []  # once: a second reader gets none
        return CommittedState(
            st.applied_index,
            MappingProxyType(dict(st.files)),
            MappingProxyType(dict(st.topics)),
            MappingProxyType(dict(st.meta)),
            self.generation,
            self.names_version,
            written,
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
        tx = self._tx = Transaction(
            raft_index,
            committed=self.journal.state,
            config=self.config,
            files=self.files,
            bucket=self.bucket,
            hours=self.hours,
            original_id=self.original_id,
            ready_segments=self._ready_segs,
            key_index=self.key_index,
        )
        try:
            result = fn(tx)
            self.key_index.settle(tx, tx.keys_added, tx.key_clean_extra)
            record = {
                "ri": raft_index,
                "files": self.files.pending_lengths(),
                "removed": self.files.pending_removals(),
                "topics": tx.topics,
                "meta": tx.meta,
            }
            self._unsynced_bytes += self.files.batch_growth()
            self._unsynced_batches += 1
            # A removal is a sync point: the files are unlinked once the frame is written,
            # and a frame that open could drop must not name a file that is gone.
            sync = (
                self.config.fsync
                or bool(record["removed"])
                or self._unsynced_bytes >= self.config.sync_every_bytes
                or self._unsynced_batches >= self.config.sync_every_batches
                or self.journal.checkpoint_due
            )
            if sync:
                # Durability rule: data bytes reach the disk before the sync point's frame,
                # so the journal up to it never names bytes a crash could lose.
                self._sync_files()
            self.journal.append(record, synced=sync)
        except BaseException:
            self._tx = None
            self._rollback(tx)
            raise
        finally:
            self._tx = None
        names_changed = bool(tx.topics or tx.dropped_hours or record["removed"]) or any(
            rel.endswith((".idx", ".rdy")) for rel in self.files.created_in_batch()
        )
        self.files.commit()
        self.key_index.commit()
        self._written = tx.written  # the next published state hands them on
        for hour in tx.dropped_hours:
            self._with_files.pop(hour, None)
            self._buckets.pop(hour, HourBucket(self.files, hour)).remove_cache_files()
        if names_changed:
            self.names_version += 1
            self._reindex_names()
        self._evict()
        return result

    def _rollback(self, tx: Transaction) -> None:
        self.files.rollback()
        self.forget_verified()
        for hour in tx.buckets_touched | tx.dropped_hours:
            bucket = self._buckets.pop(hour, None)
            self._with_files.pop(hour, None)
            if bucket is not None:
                bucket.forget()
        self.key_index.rollback()
        self._evict()

    def lookup_key(self, topic: str, key: str) -> MessageId | None:
        """The id of the live message produced with ``(topic, key)``, or None (key_index)."""
        return self.key_index.lookup(topic, key, self._tx)

    # -- snapshots ------------------------------------------------------------

    def snapshot(self, dest: str) -> list[str]:
        """Write a self-contained copy of the committed state into the new folder ``dest``.

        Every file the journal names is append-only (a failed batch only cuts back what it
        appended), so each is hard-linked: the bytes up to its committed length never
        change, and the checkpoint written here names those lengths. That makes a snapshot
        O(files), not O(bytes), on the writer's thread. The folder shares inodes with this
        store: ship it or open it read-only; :meth:`restore` copies the committed prefixes.
        Returns the relative paths written.
        """
        if self._tx is not None:
            raise StorageError("snapshot() inside apply()")
        self.sync()
        for b in self._buckets.values():
            b.save_heads()
        self.key_index.save_heads()
        state = self.journal.state
        written = _materialize(self.directory, dest, state.files, self.sealed_before_hour, link_all=True)
        self.journal.write_checkpoint(state, directory=dest)
        return written

    def link_for_backup(self, name: str) -> tuple[str, dict]:
        """Hard links to every committed file in the new folder ``BACKUP_DIR/name``, and the
        checkpoint naming their committed lengths: a snapshot, as :meth:`snapshot`, without
        a journal file or the heads caches (a backup sends neither). O(files).

        The folder lies inside the store's, so its links never cross a filesystem (the
        store may be a volume of its own), and a restore that replaces the store leaves it
        where it is. The caller removes it when done (:meth:`unlink_backup`, or the folder
        itself); an open removes what is left.
        """
        if self._tx is not None:
            raise StorageError("link_for_backup() inside apply()")
        self.sync()
        record = self.journal.state.checkpoint_record()
        dest = os.path.join(self.directory, BACKUP_DIR, name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        _materialize(self.directory, dest, record["files"], 0, link_all=True, caches=False)
        return dest, record

    def unlink_backup(self, name: str) -> None:
        """Remove the folder :meth:`link_for_backup` made for ``name``, if it is there."""
        shutil.rmtree(os.path.join(self.directory, BACKUP_DIR, name), ignore_errors=True)

    def sync(self) -> None:
        """Make everything applied so far durable: a sync point (commit_journal.py), if the
        last batch was not one. O(files written since the last one)."""
        if self._tx is not None:
            raise StorageError("sync() inside apply()")
        if self.read_only or not self.journal.unsynced:
            return
        self._sync_files()
        self.journal.append({"ri": self.applied_index}, synced=True)

    def _sync_files(self) -> None:
        """fsync every file written since the last sync point, the step before a sync
        point's frame; the bytes and batches toward the next one count from zero."""
        self.files.sync()
        self._unsynced_bytes = self._unsynced_batches = 0

    def checkpoint_record(self) -> dict:
        """The committed state as a journal checkpoint names it: every file and its committed
        length, topics, meta. With the files' bytes up to those lengths (append-only, so
        they stay as they are until retention removes them), it is a snapshot that costs
        O(1) to take; ``commit_journal.checkpoint_file`` turns it into a folder's journal.

        A sync point first: a Raft dump built on this record lets Raft drop the entries it
        covers, so the store must hold them on disk (commit_journal.py)."""
        if self._tx is not None:
            raise StorageError("checkpoint_record() inside apply()")
        self.sync()
        return self.journal.state.checkpoint_record()

    def restore(self, src: str, link_sealed: bool = True) -> None:
        """Replace this store's contents with the snapshot in ``src`` and reopen; ``src`` is
        only read. Files of sealed hours are hard-linked from it unless ``link_sealed`` is
        false (a backup, which must stay apart from the store made of it)."""
        if self._tx is not None:
            raise StorageError("restore() inside apply()")
        probe = CommitJournal(src, self.config.journal_compact_bytes)
        probe.open(read_only=True)
        probe.close()
        sealed = probe.state.meta.get("sealed_before_hour", 0)
        self.close()
        # Staged inside the store's own folder, and swapped in entry by entry: the folder
        # itself is never renamed, since it may be a mount point (a volume), where a
        # rename fails with EBUSY, and a sibling would lie on another filesystem.
        staging = os.path.join(self.directory, RESTORING_DIR)
        shutil.rmtree(staging, ignore_errors=True)
        _materialize(src, staging, probe.state.files, sealed if link_sealed else 0)
        probe.write_checkpoint(probe.state, directory=staging)
        _durable_marker(staging)
        _swap_in(self.directory, staging)
        self._open()

    # -- lifecycle ------------------------------------------------------------

    def close(self) -> None:
        if not self.read_only:
            self.sync()  # a clean stop replays nothing at the next open
            self.key_index.save_heads()
        self._close_buckets()
        self.files.close_all()
        self.journal.close()

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _materialize(
    src: str,
    dest: str,
    files: dict[str, int],
    sealed_before_hour: int,
    link_all: bool = False,
    caches: bool = True,
) -> list[str]:
    """Copy committed files from ``src`` to the new folder ``dest``; hard-link sealed ones
    whole, or with ``link_all`` every file (see :meth:`Storage.snapshot`); and the heads
    caches, unless ``caches`` is false."""
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
        if caches and rel.endswith(".idx"):
            heads = s[: -len(".idx")] + ".heads"
            if os.path.exists(heads):
                shutil.copyfile(heads, d[: -len(".idx")] + ".heads")
    # The key heads cache is replaced whole (os.replace), never written in place: a link
    # keeps the snapshot's copy as it is now.
    key_heads = os.path.join(src, KEY_HEADS_NAME)
    if caches and os.path.exists(key_heads):
        os.makedirs(os.path.join(dest, "keys"), exist_ok=True)
        try:
            os.link(key_heads, os.path.join(dest, KEY_HEADS_NAME))
        except OSError:
            shutil.copyfile(key_heads, os.path.join(dest, KEY_HEADS_NAME))
    return written


def _durable_marker(staging: str) -> None:
    """Make the staged copy durable, then mark it whole (what :meth:`Storage._open` trusts).

    Every file is fsynced, not only the folders: sealed hour files are hard links to the
    snapshot's extraction, which ``tarfile`` wrote without an fsync (an fsync through any
    link makes the inode's content durable). Files ``_copy_prefix`` wrote were fsynced
    already; a second fsync finds nothing to write."""
    for root, _dirs, files in os.walk(staging):
        for name in files:
            fsync_file(os.path.join(root, name))
        fsync_dir(root)
    with open(os.path.join(staging, RESTORED_MARKER), "wb") as f:
        fsync(f.fileno(), f.name)
    fsync_dir(staging)


def _swap_in(directory: str, staging: str) -> None:
    """Replace everything in ``directory`` with what the whole copy ``staging`` holds, in two
    phases each marked when done, so that a run cut short anywhere is finished by running
    it again: the old entries go aside into ``REPLACED_DIR``, then the staged ones move up."""
    replaced = os.path.join(directory, REPLACED_DIR)
    old_aside = os.path.join(staging, OLD_ASIDE_MARKER)
    if not os.path.exists(old_aside):
        os.makedirs(replaced, exist_ok=True)
        for name in os.listdir(directory):
            if name not in (RESTORING_DIR, REPLACED_DIR, BACKUP_DIR):
                os.rename(os.path.join(directory, name), os.path.join(replaced, name))
        fsync_dir(replaced)
        fsync_dir(directory)
        with open(old_aside, "wb") as f:
            fsync(f.fileno(), old_aside)
        fsync_dir(staging)
    for name in os.listdir(staging):
        if name not in (RESTORED_MARKER, OLD_ASIDE_MARKER):
            os.rename(os.path.join(staging, name), os.path.join(directory, name))
    fsync_dir(directory)
    # In place: the marker that says a restore is to be finished goes first, durably, so a
    # run cut short from here on leaves a staging folder that an open drops, rather than
    # one it finishes again by setting the restored store aside as the old one.
    os.unlink(os.path.join(staging, RESTORED_MARKER))
    fsync_dir(staging)
    shutil.rmtree(staging)
    shutil.rmtree(replaced, ignore_errors=True)
    fsync_dir(directory)


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
        fsync(fo.fileno(), dst)
