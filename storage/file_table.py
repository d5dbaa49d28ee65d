"""Every file the journal knows, opened lazily, with what the open batch has done to them.

Between :meth:`begin` and :meth:`commit`/:meth:`rollback` the table remembers each
touched file's committed length and each file it created, so a failed batch is undone
whole: files cut back, new files removed.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Mapping

from .append_file import AppendFile, fsync_dir
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

    def path(self, rel: str) -> str:
        return os.path.join(self.directory, rel)

    def exists(self, rel: str) -> bool:
        return rel in self.committed or rel in self._created

    def get(self, rel: str) -> AppendFile | None:
        f = self._open.get(rel)
        if f is None and rel in self.committed:
            f = self._open[rel] = AppendFile(self.path(rel), self.committed[rel])
            self._close_least_used()
        elif f is not None:
            self._open.move_to_end(rel)
            if not f.has_fd:  # about to be reopened
                self._close_least_used()
        return f

    def _close_least_used(self) -> None:
        """Close the fds of the least recently used files past ``max_open`` (never one the
        open batch touched, nor a mapped one). The objects stay: each reopens when read."""
        with_fd = [rel for rel, f in self._open.items() if f.has_fd]
        excess = len(with_fd) - self.max_open
        for rel in with_fd:
            if excess <= 0:
                return
            f = self._open[rel]
            if rel in self._touched or f.mapped:
                continue
            f.close()
            excess -= 1

    def writable(self, rel: str, kind: bytes) -> AppendFile:
        """The file, created with its magic if new, marked as touched by this batch."""
        f = self.get(rel)
        if f is None:
            os.makedirs(os.path.dirname(self.path(rel)), exist_ok=True)
            f = self._open[rel] = AppendFile.create(self.path(rel), magic(kind))
            self._created.add(rel)
            self._dirty_dirs.add(os.path.dirname(self.path(rel)))
            self._touched.setdefault(rel, 0)
        else:
            self._touched.setdefault(rel, f.length)
        self._dirty.add(rel)
        return f

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
            f = self._open.get(rel)
            if f is not None:
                f.fsync()
            elif os.path.exists(self.path(rel)):  # its fd was closed meanwhile (max_open)
                fd = os.open(self.path(rel), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        for d in self._dirty_dirs:
            if os.path.isdir(d):
                fsync_dir(d)
        self._dirty.clear()
        self._dirty_dirs.clear()

    def commit(self) -> None:
        for rel in self._removed:
            self.close(rel)
            if os.path.exists(self.path(rel)):
                os.unlink(self.path(rel))
        self._forget_batch()

    def rollback(self) -> None:
        for rel, length in self._touched.items():
            if rel in self._created:
                self.close(rel)
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
        f = self._open.pop(rel, None)
        if f is not None:
            f.close()

    def close_all(self) -> None:
        for f in self._open.values():
            f.close()
        self._open.clear()
