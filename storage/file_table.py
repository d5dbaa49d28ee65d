"""Every file the journal knows, opened lazily, with what the open batch has done to them.

Between :meth:`begin` and :meth:`commit`/:meth:`rollback` the table remembers each
touched file's committed length and each file it created, so a failed batch is undone
whole: files cut back, new files removed.

A file written since the last sync point keeps the fd that wrote it until that sync
point fsyncs it through that fd: closed by the LRU or by its hour's eviction, the fd is
only held aside. Linux reports a writeback error to the fds open when it happened, and
an inode that no fd holds may be evicted with its error; an fsync through an fd opened
afterwards could then succeed over lost pages (storage/durable.py).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Mapping

from .append_file import AppendFile
from .durable import fsync_dir
from .magic import magic


class FileTable:
    def __init__(self, directory: str, committed: Mapping[str, int], max_open: int = 256) -> None:
        self.directory = directory
        self.committed = committed  # the journal's {relpath: length}, updated on commit
        self.max_open = max_open  # fds kept open at most; the least recently used are closed
        self._open: OrderedDict[str, AppendFile] = OrderedDict()
        self._touched: dict[str, int] = {}  # relpath -> length before this batch
        self._created: set[str] = set()
        self._removed: set[str] = set()
        # Written since the last sync point (storage/commit_journal.py), and the folders
        # that got new files meanwhile: what the next sync point fsyncs.
        self._dirty: set[str] = set()
        self._dirty_dirs: set[str] = set()
        # Files of ``_dirty`` closed meanwhile (LRU, eviction): their fds, until the sync point.
        self._held: dict[str, AppendFile] = {}

    def path(self, rel: str) -> str:
        return os.path.join(self.directory, rel)

    def exists(self, rel: str) -> bool:
        return rel in self.committed or rel in self._created

    def get(self, rel: str) -> AppendFile | None:
        f = self._open.get(rel)
        if f is None and rel in self._held:
            f = self._open[rel] = self._held.pop(rel)
            self._close_least_used()
        elif f is None and rel in self.committed:
            f = self._open[rel] = AppendFile(self.path(rel), self.committed[rel])
            self._close_least_used()
        elif f is not None:
            self._open.move_to_end(rel)
            if not f.has_fd:  # about to be reopened
                self._close_least_used()
        return f

    def _close_least_used(self) -> None:
        """Close the fds of the least recently used files past ``max_open`` (never one the
        open batch touched, nor a mapped one, nor one written since the last sync point).
        The objects stay: each reopens when read."""
        with_fd = [rel for rel, f in self._open.items() if f.has_fd]
        excess = len(with_fd) - self.max_open
        for rel in with_fd:
            if excess <= 0:
                return
            f = self._open[rel]
            if rel in self._touched or rel in self._dirty or f.mapped:
                continue
            f.close()
            excess -= 1

    def writable(self, rel: str, kind: bytes) -> AppendFile:
        """The file, created with its magic if new, marked as touched by this batch."""
        f = self.get(rel)
        if f is None:
            self._make_folder(os.path.dirname(self.path(rel)))
            f = self._open[rel] = AppendFile.create(self.path(rel), magic(kind))
            self._created.add(rel)
            self._dirty_dirs.add(os.path.dirname(self.path(rel)))
            self._touched.setdefault(rel, 0)
        else:
            self._touched.setdefault(rel, f.length)
        self._dirty.add(rel)
        return f

    def _make_folder(self, folder: str) -> None:
        """Make ``folder`` and its missing parents; the next sync point fsyncs the parent of
        each one made, whose entry names it, as it does a folder that gained files."""
        if os.path.isdir(folder):
            return
        self._make_folder(os.path.dirname(folder))
        os.makedirs(folder, exist_ok=True)
        self._dirty_dirs.add(os.path.dirname(folder))

    def remove(self, rel: str) -> None:
        if self.exists(rel):
            self._removed.add(rel)

    def pending_lengths(self) -> dict[str, int]:
        return {rel: self._open[rel].length for rel in self._touched if rel not in self._removed}

    def created_in_batch(self) -> set[str]:
        return set(self._created)

    def pending_removals(self) -> list[str]:
        return sorted(self._removed)

    def batch_growth(self) -> int:
        """Bytes the open batch appended, over every file it touched."""
        touched = self._touched.items()
        return sum(self._open[rel].length - before for rel, before in touched if rel in self._open)

    def sync(self) -> None:
        """Make every byte written since the last sync point durable, and the folders that
        gained files: the step that must precede a sync point's journal frame."""
        for rel in self._dirty:
            # Through the fd that wrote it (module docstring). A file of ``_dirty`` with
            # neither was removed (retention) or rolled back: nothing of it to keep.
            f = self._open.get(rel) or self._held.get(rel)
            if f is not None:
                f.fsync()
        for d in self._dirty_dirs:
            if os.path.isdir(d):
                fsync_dir(d)
        self._dirty.clear()
        self._dirty_dirs.clear()
        for f in self._held.values():
            f.close()
        self._held.clear()

    def commit(self) -> None:
        """After the batch's frame: what it removed is unlinked, and the unlinks made
        durable (a power loss would bring the files back, hours of messages each)."""
        for rel in self._removed:
            self._forget(rel)
            if os.path.exists(self.path(rel)):
                os.unlink(self.path(rel))
        for folder in sorted({os.path.dirname(self.path(rel)) for rel in self._removed}):
            fsync_dir(folder)
        self._forget_batch()

    def rollback(self) -> None:
        for rel, length in self._touched.items():
            if rel in self._created:
                self._forget(rel)
                os.unlink(self.path(rel))
            else:
                self._open[rel].truncate(length)
        self._forget_batch()

    def _forget_batch(self) -> None:
        self._touched.clear()
        self._created.clear()
        self._removed.clear()

    def follow(self, committed: Mapping[str, int]) -> None:
        """A reader's table: take the writer's newer committed lengths (files only grow)."""
        self.committed = committed
        for rel, f in list(self._open.items()):
            if rel in committed:
                f.length = committed[rel]
            else:
                self.close(rel)

    def in_batch(self, rel: str) -> bool:
        return rel in self._touched

    def close(self, rel: str) -> None:
        """Release the file's fd (and map); held aside until the next sync point if it was
        written since the last one (module docstring)."""
        f = self._open.pop(rel, None)
        if f is None:
            return
        if rel in self._dirty and f.has_fd:
            f.set_mapped(False)
            self._held[rel] = f
        else:
            f.close()

    def _forget(self, rel: str) -> None:
        """Close a file that is about to be unlinked: nothing of it needs a sync any more."""
        self._dirty.discard(rel)
        for table in (self._open, self._held):
            f = table.pop(rel, None)
            if f is not None:
                f.close()

    def close_all(self) -> None:
        for f in (*self._open.values(), *self._held.values()):
            f.close()
        self._open.clear()
        self._held.clear()
