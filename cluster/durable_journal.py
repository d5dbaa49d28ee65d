"""pysyncobj's file journal, made durable before it counts.

pysyncobj writes log entries into an mmap that it never msyncs, and term and vote into a
meta file that it never fsyncs (DESIGN §5 field notes). Its "committed on a majority" was
so "in the page cache of a majority": a correlated power loss could lose acknowledged
messages or let a node vote twice in one term.

The rule, enforced here and in :class:`~horologe.cluster.raft_node.RaftNode`:

* a follower syncs its journal before it tells the leader it has an entry
  (``RaftNode._SyncObj__sendNextNodeIdx``);
* every node syncs its journal before it applies an entry, and the master acknowledges
  a produce only after applying it: so an acknowledged entry is on disk on the master
  and on a follower that answered for it, a majority of three;
* term and vote are fsynced (file and folder) before any message that reflects them;
* before the journal drops entries that a snapshot replaced, the folder is fsynced, so
  the snapshot's rename is durable first (pysyncobj renames without a folder fsync).

Syncs are grouped: entries added since the last sync are flushed together, once.

It also counts the bytes of the commands pysyncobj holds in memory (:attr:`DurableJournal.bytes`),
so that compaction can be asked for by size, and after compaction it gives back the pages
of the journal's mapping that now lie past its end (``MADV_DONTNEED``): pysyncobj's mapping
only grows, and its touched pages would otherwise stay in the process's RSS.
"""

from __future__ import annotations

import mmap
import os

from pysyncobj.journal import FileJournal, MetaStorer, dumps

from horologe.storage.append_file import fsync_dir


class DurableMetaStorer(MetaStorer):
    """Term, vote and commit index: written to a temp file, fsynced, renamed, folder fsynced."""

    def storeMeta(self, meta) -> None:  # noqa: N802 - pysyncobj's name
        path = self.getPath()
        with open(path + ".tmp", "wb") as f:
            f.write(dumps(meta))
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
        fsync_dir(os.path.dirname(path))


class DurableJournal:
    """Wraps a :class:`FileJournal`; :meth:`sync` msyncs what was added since the last sync."""

    def __init__(self, inner: FileJournal) -> None:
        self._inner = inner
        meta_path = inner._FileJournal__metaStorer.getPath()
        inner._FileJournal__metaStorer = DurableMetaStorer(meta_path)
        self._folder = os.path.dirname(meta_path)
        # Whatever pysyncobj wrote while starting, the journal file's creation included.
        self._dirty = self._folder_dirty = True
        self.bytes = self._held()

    def _held(self) -> int:
        inner = self._inner
        return sum(len(inner[i][0]) for i in range(len(inner)))

    def _release_tail(self) -> None:
        """Drop the mapping's pages past the journal's end from this process's memory."""
        file = self._inner._FileJournal__journalFile
        mapping: mmap.mmap = file._ResizableFile__mm
        end = self._inner._FileJournal__currentOffset
        start = -(-end // mmap.PAGESIZE) * mmap.PAGESIZE
        if start < len(mapping):
            mapping.madvise(mmap.MADV_DONTNEED, start, len(mapping) - start)

    def sync(self) -> None:
        if self._folder_dirty:
            fsync_dir(self._folder)
            self._folder_dirty = False
        if self._dirty:
            self._inner.flush()  # msync(MS_SYNC) of the mapping
            self._dirty = False

    def add(self, command, idx, term) -> None:
        self._inner.add(command, idx, term)
        self.bytes += len(command)
        self._dirty = True

    def clear(self) -> None:  # a snapshot was installed in its place
        self._inner.clear()
        self.bytes = 0
        self._dirty = self._folder_dirty = True
        self._release_tail()

    def deleteEntriesFrom(self, entryFrom) -> None:  # noqa: N802
        self._inner.deleteEntriesFrom(entryFrom)
        self.bytes = self._held()
        self._dirty = True

    def deleteEntriesTo(self, entryTo) -> None:  # noqa: N802 - compaction, after a snapshot
        self._inner.deleteEntriesTo(entryTo)
        self.bytes = self._held()
        self._dirty = self._folder_dirty = True
        self.sync()  # the rewritten head is on disk before the tail's pages are dropped
        self._release_tail()

    def __getitem__(self, item):
        return self._inner[item]

    def __len__(self) -> int:
        return len(self._inner)

    def __getattr__(self, name):  # term, vote, commit index, timers, _destroy: as pysyncobj has them
        return getattr(self._inner, name)
