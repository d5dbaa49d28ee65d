"""The commit journal (``commits.log``): the single commit point of every batch.

The file is the magic ``HZJRNL`` v1, then frames (see :mod:`framing`) whose payloads
are msgpack maps::

    ri        int              Raft index of the batch (0 for the initial checkpoint)
    full      bool             true for a checkpoint that restates the whole state
    files     {path: length}   committed length of each file the batch touched
    removed   [path]           files the batch deleted (retention)
    topics    {name: id}       topics registered by the batch
    meta      {key: value}     small state set by the batch (watermark, offsets...);
                               a value of nil removes the key

Rule (enforced in :meth:`Storage.apply`): a batch's data files are written and
fsynced *before* its journal frame is appended and fsynced. So the journal never
names bytes that are not on disk, and anything on disk past the lengths it names
is an uncommitted tail.

The state is the fold of the frames. When the journal grows past a threshold it is
rewritten as one ``full`` checkpoint (temp file, fsync, ``os.replace``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import msgpack

from .append_file import AppendFile, fsync_dir
from .errors import CorruptLogError, StorageError
from .framing import frame, scan_frames
from .magic import COMMIT_JOURNAL, MAGIC_SIZE, check_magic, magic

JOURNAL_NAME = "commits.log"


@dataclass
class JournalState:
    applied_index: int = 0
    files: dict[str, int] = field(default_factory=dict)
    topics: dict[str, int] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def fold(self, rec: dict) -> None:
        if rec.get("full"):
            self.files.clear()
            self.topics.clear()
            self.meta.clear()
        self.applied_index = max(self.applied_index, rec["ri"])
        self.files.update(rec.get("files", {}))
        for path in rec.get("removed", ()):
            self.files.pop(path, None)
        self.topics.update(rec.get("topics", {}))
        for key, value in rec.get("meta", {}).items():
            if value is None:
                self.meta.pop(key, None)
            else:
                self.meta[key] = value

    def checkpoint_record(self) -> dict:
        return {
            "ri": self.applied_index,
            "full": True,
            "files": dict(self.files),
            "topics": dict(self.topics),
            "meta": dict(self.meta),
        }


def _pack(rec: dict) -> bytes:
    return frame(msgpack.packb(rec, use_bin_type=True))


def checkpoint_file(record: dict) -> bytes:
    """A whole one-frame journal holding ``record`` (a ``checkpoint_record()``)."""
    return magic(COMMIT_JOURNAL) + _pack(record)


class CommitJournal:
    def __init__(self, directory: str, compact_bytes: int) -> None:
        self.directory = directory
        self.path = os.path.join(directory, JOURNAL_NAME)
        self.compact_bytes = compact_bytes
        self.state = JournalState()
        self.torn_tail: tuple[int, int] | None = None  # (offset, bytes) set aside on open
        self._file: AppendFile | None = None

    def open(self, read_only: bool = False) -> None:
        """Fold the journal. A torn last frame is set aside, or only skipped when ``read_only``."""
        if not os.path.exists(self.path):
            if read_only:
                raise StorageError(f"{self.directory} is not a Horologe store (no {JOURNAL_NAME})")
            self.write_checkpoint(self.state)
            return
        with open(self.path, "rb") as f:
            buf = f.read()
        check_magic(buf, COMMIT_JOURNAL, self.path)
        end = MAGIC_SIZE
        for offset, payload in scan_frames(buf, MAGIC_SIZE, self.path):
            try:
                rec = msgpack.unpackb(payload, raw=False)
                self.state.fold(rec)
            except (ValueError, TypeError, KeyError, msgpack.UnpackException) as e:
                raise CorruptLogError(self.path, offset, f"undecodable commit: {e}") from e
            end = offset + len(payload) + 12
        if end < len(buf):
            self.torn_tail = (end, len(buf) - end)
        if read_only:
            return
        if end < len(buf):
            with open(f"{self.path}.torn-{end}", "wb") as aside:
                aside.write(buf[end:])
        self._file = AppendFile(self.path, end)
        if end < len(buf):
            self._file.truncate(end)

    def append(self, rec: dict, *, fsync: bool) -> None:
        assert self._file is not None
        self._file.append(_pack(rec))
        if fsync:
            self._file.fsync()
        self.state.fold(rec)
        if self._file.length > self.compact_bytes:
            self.write_checkpoint(self.state)

    def write_checkpoint(self, state: JournalState, directory: str | None = None) -> None:
        """Write ``state`` as a one-frame journal into ``directory`` (default: ours)."""
        target_dir = directory or self.directory
        target = os.path.join(target_dir, JOURNAL_NAME)
        tmp = target + ".tmp"
        with open(tmp, "wb") as f:
            f.write(checkpoint_file(state.checkpoint_record()))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        fsync_dir(target_dir)
        if directory is None:
            if self._file is not None:
                self._file.close()
            self._file = AppendFile(self.path, os.path.getsize(self.path))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
