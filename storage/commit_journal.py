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
    u         bool             unsynced: written without fsync (absent: a sync point)

Rule (enforced in :meth:`Storage.apply`): a *sync point* is a frame written after every
data byte named by it and by the unsynced frames before it was fsynced, and fsynced
itself. A full checkpoint is always one, and so is every frame of a journal written
before frames could be unsynced (they carry no ``u``). So the journal up to its last
sync point never names bytes that are not on disk.

Frames after the last sync point (``u`` set) may name bytes a power loss took. Open
drops them, and the store starts from the last sync point: the Raft journal, fsynced
before any entry is acknowledged or applied, holds every entry after it and replays
them (a Raft dump always follows a sync point, so compaction never cuts them away).
Anything on disk past the lengths the kept state names is an uncommitted tail.

A power loss can also keep those frames out of order: the disk and the kernel write
pages back in no order, so a later frame may be on disk and an earlier one zeros. A bad
frame with more after it is taken for that, and dropped with everything after the last
sync point before it, only when it looks like a lost write (``framing.lost_write``) and
no sync point past it has a frame after it (that frame was written once the sync point's
fsync returned, which made the damage's bytes durable). Any other is corruption.

The state is the fold of the frames. When the journal grows past a threshold it is
rewritten, at a sync point, as one ``full`` checkpoint (temp file, fsync, ``os.replace``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

import msgpack

from .append_file import AppendFile
from .durable import fsync, fsync_dir
from .errors import CorruptLogError, StorageError
from .framing import frame, frames_past, lost_write, scan_frames
from .magic import COMMIT_JOURNAL, MAGIC_SIZE, check_magic, magic

JOURNAL_NAME = "commits.log"

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class RolledBack:
    """Unsynced frames that open dropped: how many, the last Raft index among them, and
    every file they named (bytes of those past the kept lengths are theirs)."""

    frames: int
    last_index: int
    files: set[str]


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
        self.rolled_back: RolledBack | None = None  # unsynced frames dropped on open
        self.lost_at: int | None = None  # where open met writes a power cut lost out of order
        self.unsynced = False  # whether the last frame appended is not a sync point
        self._file: AppendFile | None = None
        self._restated = 0  # bytes of the last checkpoint this journal was rewritten as

    def open(self, read_only: bool = False) -> None:
        """Fold the journal up to its last sync point. A torn last frame is set aside;
        unsynced frames after the sync point are dropped (their files are named in
        ``rolled_back``), and so are writes lost out of order past it (``lost_at``) and
        the frames after them. ``read_only`` (a reader beside a running writer) folds
        every frame, as the writer sees them, and changes nothing on disk."""
        if not os.path.exists(self.path):
            if read_only:
                raise StorageError(f"{self.directory} is not a Horologe store (no {JOURNAL_NAME})")
            self.write_checkpoint(self.state)
            return
        with open(self.path, "rb") as f:
            buf = f.read()
        check_magic(buf, COMMIT_JOURNAL, self.path)
        found: list[tuple[int, bytes]] = []
        past: list[dict] = []  # records past writes lost out of order
        try:
            for offset, payload in scan_frames(buf, MAGIC_SIZE, self.path):
                found.append((offset, payload))
        except CorruptLogError as damage:
            if read_only:
                raise
            past = self._past_lost_writes(buf, damage)
            self.lost_at = damage.offset
        records = self._decoded(found)
        frames = [
            (offset + len(payload) + 12, rec) for (offset, payload), rec in zip(found, records, strict=True)
        ]
        synced = len(frames) - 1
        if not read_only:
            synced = max((i for i, (_, rec) in enumerate(frames) if not rec.get("u")), default=-1)
        for offset_end, rec in frames[: synced + 1]:
            try:
                self.state.fold(rec)
            except (ValueError, TypeError, KeyError) as e:
                raise CorruptLogError(self.path, offset_end, f"undecodable commit: {e}") from e
        end = frames[synced][0] if synced >= 0 else MAGIC_SIZE
        dropped = [rec for _, rec in frames[synced + 1 :]] + past
        if dropped:
            self.rolled_back = RolledBack(
                len(dropped), dropped[-1]["ri"], {rel for rec in dropped for rel in rec.get("files", {})}
            )
        elif end < len(buf):
            self.torn_tail = (end, len(buf) - end)
        if read_only:
            return
        if self.torn_tail:
            with open(f"{self.path}.torn-{end}", "wb") as aside:
                aside.write(buf[end:])
        self._file = AppendFile(self.path, end)
        if end < len(buf):
            self._cut(end)

    def _cut(self, end: int) -> None:
        """Cut the journal back to ``end``, durably before anything is appended in its
        place, as the Raft journal's cut is. Else the disk still holds what was dropped:
        a power cut that then keeps some sectors of the frames written since leaves the
        old bytes up to the old end, and zeros past it, inside one frame, which no lost
        write leaves past a durable end that is a frame's (tests/sim/test_out_of_order.py
        forces it)."""
        self._file.truncate(end)
        self._file.fsync()

    def _past_lost_writes(self, buf: bytes, damage: CorruptLogError) -> list[dict]:
        """The records of the frames past ``damage``, when it is writes a power cut lost
        out of order (its disk and the kernel write pages back in no order): the damage
        looks like a lost write (``framing.lost_write``), and no sync point past it has a
        frame after it. Such a frame is written once the sync point's fsync returned, and
        that fsync made every byte before it durable: damage there is not a lost write.
        Otherwise ``damage`` is raised."""
        if not lost_write(buf, damage.offset):
            raise damage
        past = self._decoded(frames_past(buf, damage.offset + 1))
        if any(not rec.get("u") for rec in past[:-1]):
            raise damage
        return past

    def _decoded(self, frames: list[tuple[int, bytes]]) -> list[dict]:
        out = []
        for offset, payload in frames:
            try:
                out.append(msgpack.unpackb(payload, raw=False))
            except (ValueError, TypeError, msgpack.UnpackException) as e:
                raise CorruptLogError(self.path, offset, f"undecodable commit: {e}") from e
        return out

    @property
    def checkpoint_due(self) -> bool:
        """Whether the journal has grown ``compact_bytes`` past its last checkpoint
        (rewritten at the next sync point). Past the checkpoint, not in all: a state larger
        than ``compact_bytes`` (schedules' definitions in meta) would make every
        checkpoint due again at once, every batch a sync point and a rewrite."""
        return self._file is not None and self._file.length > self._restated + self.compact_bytes

    def append(self, rec: dict, *, synced: bool) -> None:
        """Append ``rec``: a sync point when ``synced`` (the caller fsynced its data first,
        and this fsyncs the journal), else an unsynced frame (module docstring)."""
        assert self._file is not None
        if not synced:
            rec = {**rec, "u": True}
        self._file.append(_pack(rec))
        if synced:
            self._file.fsync()
        self.state.fold(rec)
        self.unsynced = not synced
        if synced and self.checkpoint_due:
            # The batch is committed: its sync point is on disk, and the caller must not
            # roll its data back. The checkpoint only restates the journal shorter; one
            # that fails (disk full) leaves the journal as it was, tried again at the next
            # sync point.
            try:
                self.write_checkpoint(self.state)
            except OSError as e:
                log.warning("%s: checkpoint not written (%s); the journal stays as it is", self.path, e)

    def write_checkpoint(self, state: JournalState, directory: str | None = None) -> None:
        """Write ``state`` as a one-frame journal into ``directory`` (default: ours)."""
        target_dir = directory or self.directory
        target = os.path.join(target_dir, JOURNAL_NAME)
        tmp = target + ".tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(checkpoint_file(state.checkpoint_record()))
                f.flush()
                fsync(f.fileno(), tmp)
        except OSError:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        os.replace(tmp, target)
        fsync_dir(target_dir)
        if directory is None:
            if self._file is not None:
                self._file.close()
            self._file = AppendFile(self.path, os.path.getsize(self.path))
            self._restated = self._file.length

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
