"""pysyncobj's Raft log, kept on disk: a few integers per entry in memory (issue #12).

pysyncobj's own ``FileJournal`` holds every entry's command in a Python list and in an
mmap that stays resident, so a node's memory grew with its log. :class:`DiskJournal`
implements the same journal interface with the commands left in the file.

File ``journal`` (in the node's ``raft/`` folder), little-endian::

    magic    HZRAFT v1 (8 bytes, see storage/magic.py)
    frame    one per entry (storage/framing.py): u32 len | payload | u32 crc32 | u32 len
    payload  u64 idx | u64 term | command (len - 16 bytes)

``journal.meta`` is pysyncobj's own meta file, unchanged: ``pysyncobj.pickle.dumps`` of
``{"currentTerm", "votedForNodeId", "raftCommitIndex"}``, so a data dir keeps its term
and vote across versions.

Memory: per entry, the frame's offset, the Raft index and the term (three
``array("Q")``, 24 bytes). Commands are read back with ``os.pread`` when pysyncobj asks
for them; a slice is a lazy :class:`EntriesView` that reads entries only when they are
touched, in chunks of at most ``READ_CHUNK`` bytes. Besides that, only the first entry
and the most recently added ones (``recent_bytes``, 2 MiB by default, and always the
last) are kept, because pysyncobj reads ``[0]`` and ``[-1]`` on nearly every step and
sends and applies an entry soon after adding it.

Thread rule: the journal is touched only by pysyncobj's tick thread (and by the thread
that builds the node, before the tick thread starts). ``len()`` and :attr:`bytes` are
plain reads, safe from any thread (``/admin/status``).

The durability rule, enforced here and in :class:`~horologe.cluster.raft.node.RaftNode`
(pysyncobj itself never syncs its journal, DESIGN §5 field notes, so its "committed on a
majority" was "in the page cache of a majority"):

* a follower syncs its journal before it tells the leader it has an entry
  (``RaftNode._answer_leader``);
* the leader syncs the entries it appends as soon as it has sent them
  (``RaftNode._proposals_appended``), before it counts its own copy towards a commit,
  so a commit index that reaches the followers names entries on disk on a majority;
* entries read back on open count as unsynced (a process that died before its sync left
  them in the page cache), so the first of these syncs makes them durable too;
* every node syncs its journal before it applies an entry, and the master acknowledges
  a produce only after applying it: so an acknowledged entry is on disk on the master
  and on a follower that answered for it, a majority of three;
* term and vote are fsynced (file and folder) before any message that reflects them;
  the commit index is stored on the one-second timer, after a sync, so it never names
  entries that are not on disk;
* before the journal drops entries that a snapshot replaced, the folder is fsynced, so
  the snapshot's rename is durable first (pysyncobj renames without a folder fsync).

Syncs are grouped: :meth:`DiskJournal.sync` fsyncs once whatever was added since the
last sync, and does nothing when nothing was; a cut (``deleteEntriesFrom``) is fsynced at
once, before anything is appended in its place. An fsync that fails ends the process
(storage/durable.py): a retry could succeed over pages the kernel dropped, and pysyncobj's
tick thread would catch a mere exception and run the tick again. So does a failed write
of an entry, of a rewrite or of the meta (disk full, EIO, a short write): pysyncobj has
changed its state in memory around it (storage/durable.py ``write_failed``).

Recovery on open: every frame is read (in chunks) and checked. A torn frame is copied
aside to ``journal.torn-<offset>`` with everything after it, and cut: one that runs past
the end, or a bad one that a write lost at a power cut leaves. Such a write leaves whole
sectors as they were, and past the journal's synced end that is zeros: the frame's
length is zero, its two lengths disagree, or a sector (``SECTOR``) within it reads back
empty. Whole frames may follow it (the disk and the kernel write pages back in no order),
and none of them was synced, or the lost write would be on disk too. A bad frame whose
lengths agree and none of whose sectors reads back empty, yet which fails its checksum,
raises :class:`CorruptLogError`: bit rot in an entry synced and acknowledged after the
last stored commit index leaves that, and was cut as torn. So does a "torn" frame at or
below the stored commit index, which names synced entries only, unless the node's dump
holds the log up to that index (``held_to``). A ``journal``
in pysyncobj's format (it starts with ``PYSYNCOBJ``) is converted once, read with
pysyncobj's ``FileJournal``.

Rewrites (compaction, a snapshot installed, creation, conversion) go to ``journal.tmp``,
which is fsynced and renamed over the journal, with the folder fsynced around the rename.
"""

from __future__ import annotations

import contextlib
import logging
import os
import zlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from struct import Struct

from pysyncobj.journal import FileJournal, Journal
from pysyncobj.pickle import dumps, loads, to_bytes

from horologe.storage.append_file import AppendFile
from horologe.storage.durable import fsync, fsync_dir, write_failed
from horologe.storage.errors import CorruptLogError, StorageError
from horologe.storage.framing import (
    FRAME_HEAD,
    FRAME_OVERHEAD,
    FRAME_TAIL,
    frame,
    lost_write,
    refuse_a_damaged_length,
)
from horologe.storage.magic import MAGIC_SIZE, RAFT_LOG, check_magic, magic

from ..errors import StaleJournalViewError

log = logging.getLogger(__name__)

ENTRY_HEAD = Struct("<QQ")  # idx, term
assert ENTRY_HEAD.size == 16
ENTRY_OVERHEAD = FRAME_OVERHEAD + ENTRY_HEAD.size  # file bytes of an entry beyond its command
JOURNAL_MAGIC = magic(RAFT_LOG)
PYSYNCOBJ_MAGIC = b"PYSYNCOBJ"
READ_CHUNK = 1 << 20  # bytes read at once when scanning or iterating
RECENT_BYTES = 2 << 20  # commands of the latest entries kept for pysyncobj's next reads

Entry = tuple[bytes, int, int]  # (command, idx, term), as pysyncobj has it


class DiskJournal(Journal):
    """pysyncobj's journal interface over the file at ``path`` (created, or converted, on open).

    Items are ``(command, idx, term)`` tuples; ``journal[a:b]`` is an :class:`EntriesView`.
    """

    def __init__(self, path: str, recent_bytes: int = RECENT_BYTES, held_to: int = 0) -> None:
        """``held_to``: the Raft index up to which the node's dump holds the log (0 without
        one): a torn frame may name those entries, as they need not be on disk here."""
        self.path = path
        self.held_to = held_to
        self.folder = os.path.dirname(os.path.abspath(path))
        self.meta_path = path + ".meta"
        self.recent_bytes = recent_bytes
        self.bytes = 0  # bytes of the commands in the journal (compaction by size)
        self.torn_tail: tuple[int, int] | None = None  # (offset, bytes) set aside on open
        self._offsets = array("Q")  # where each entry's frame starts in the file
        self._idx = array("Q")
        self._terms = array("Q")
        self._version = 0  # moves when entries are cut or rewritten: views older than that are stale
        self._head: Entry | None = None  # entry 0, once read
        self._recent: dict[int, Entry] = {}  # idx -> entry, the latest added, oldest first
        self._recent_held = 0
        self._dirty = False  # written or cut since the last sync
        self._meta = read_meta(self.meta_path)
        self._meta_saved = True
        self._file: AppendFile | None = None
        if not os.path.exists(path):
            self._replace_file(())
        elif _starts_with(path, PYSYNCOBJ_MAGIC):
            self._convert()
        self._open()

    # -- opening --------------------------------------------------------------------

    def _open(self) -> None:
        size = os.path.getsize(self.path)
        self._file = AppendFile(self.path, size)
        fd = self._file.fd
        check_magic(os.pread(fd, MAGIC_SIZE, 0), RAFT_LOG, self.path)
        end = self._scan(fd, size)
        self.bytes = end - MAGIC_SIZE - len(self._offsets) * ENTRY_OVERHEAD
        # Entries read back may be in the page cache only: a process that died between
        # writing them and syncing them (SIGKILL, a crash in the write) left them there,
        # and a power loss may still take them. The first sync point makes them durable,
        # before they are counted towards a commit, reported to a leader or applied.
        self._dirty = len(self._offsets) > 0
        if end < size:
            # Only what was never synced can be torn, and the stored commit index names
            # synced entries only: a "torn" frame at or below it is damage (a length field
            # hit on the medium, say), and cutting there would drop acknowledged entries.
            # Unless the dump holds them: after a snapshot install the journal is cleared
            # and begins again with the dump's last two entries, added unsynced.
            committed = self._meta.get("raftCommitIndex", 0)
            if max(self.last_idx, self.held_to) < committed:
                raise CorruptLogError(
                    self.path,
                    end,
                    f"a frame past entry {self.last_idx} is damaged, though entries up to "
                    f"{committed} were synced and committed (the dump holds up to "
                    f"{self.held_to}): not a torn tail",
                )
            self._set_aside(fd, end, size)
            self._file.truncate(end)
            # Durable before anything is appended in the torn tail's place, as a cut is
            # (deleteEntriesFrom); the entries read back are then on disk too.
            self._file.fsync()
            self._dirty = False

    def _scan(self, fd: int, size: int) -> int:
        """Index every good frame (commands are checked, not kept); return where they end."""
        buf, buf_at = memoryview(b""), MAGIC_SIZE  # buf holds the file's bytes from buf_at
        pos = MAGIC_SIZE
        while pos + FRAME_OVERHEAD <= size:
            if pos + FRAME_HEAD.size > buf_at + len(buf):
                buf, buf_at = memoryview(os.pread(fd, READ_CHUNK, pos)), pos
            (n,) = FRAME_HEAD.unpack_from(buf, pos - buf_at)
            stop = pos + FRAME_HEAD.size + n
            if stop + FRAME_TAIL.size > size:
                refuse_a_damaged_length(os.pread(fd, size - pos, pos), 0, self.path, pos)
                break  # torn: the frame claims more bytes than the file holds
            if stop + FRAME_TAIL.size > buf_at + len(buf):
                whole = stop + FRAME_TAIL.size - pos
                buf, buf_at = memoryview(os.pread(fd, max(READ_CHUNK, whole), pos)), pos
            at = pos - buf_at
            payload = buf[at + FRAME_HEAD.size : at + FRAME_HEAD.size + n]
            crc, n2 = FRAME_TAIL.unpack_from(buf, at + FRAME_HEAD.size + n)
            if n2 != n or crc != zlib.crc32(payload) or n < ENTRY_HEAD.size:
                if not lost_write(buf, at, buf_at):
                    raise CorruptLogError(
                        self.path,
                        pos,
                        "the frame fails its checksum or is shorter than an entry's index and term, though "
                        "its lengths agree and none of its sectors reads back empty: damaged, not torn",
                    )
                # Torn: a write lost at a power cut. Whole frames may follow it: the disk
                # and the kernel write pages back in no order. None of them was synced,
                # or the lost write would be on disk too.
                break
            idx, term = ENTRY_HEAD.unpack_from(payload)
            self._offsets.append(pos)
            self._idx.append(idx)
            self._terms.append(term)
            pos = stop + FRAME_TAIL.size
        return pos

    def _set_aside(self, fd: int, end: int, size: int) -> None:
        aside = f"{self.path}.torn-{end}"
        log.warning("%s: torn tail of %d bytes at %d set aside to %s", self.path, size - end, end, aside)
        self.torn_tail = (end, size - end)
        with open(aside, "wb") as out:
            for pos in range(end, size, READ_CHUNK):
                out.write(os.pread(fd, min(READ_CHUNK, size - pos), pos))

    def _convert(self) -> None:
        """Rewrite a journal in pysyncobj's format in ours, once (a data dir from before #12)."""
        old = FileJournal(self.path)
        try:
            count = len(old)
            entries = (old[k] for k in range(count))
            self._replace_file(_frame(to_bytes(cmd), idx, term) for cmd, idx, term in entries)
        finally:
            old._destroy()  # unmaps the old file, which the rename already replaced
        log.info("%s: converted %d entries from pysyncobj's format", self.path, count)

    # -- writing ----------------------------------------------------------------------

    def add(self, command, idx, term) -> None:
        command = to_bytes(command)
        try:
            at = self._file.append(_frame(command, idx, term))
        except (OSError, StorageError) as e:  # disk full, a short write, EIO
            write_failed(self.path, e)
        self._offsets.append(at)
        self._idx.append(idx)
        self._terms.append(term)
        self.bytes += len(command)
        self._dirty = True
        entry = (command, idx, term)
        if len(self._offsets) == 1:
            self._head = entry
        self._remember(entry)

    def deleteEntriesFrom(self, entryFrom) -> None:  # noqa: N802, N803 - pysyncobj's names
        """Cut the entries from position ``entryFrom`` on (``del log[entryFrom:]``)."""
        count = len(self._offsets)
        first = slice(entryFrom, None).indices(count)[0]
        if first >= count:
            return
        end = self._offsets[first]
        self.bytes -= self._file.length - end - (count - first) * ENTRY_OVERHEAD
        self._file.truncate(end)
        # Durable before anything is appended in the cut entries' place: else a crash could
        # keep the old length with new bytes written over part of it, a bad frame followed
        # by old non-zero bytes, which open refuses (CorruptLogError). Cuts are rare (a
        # follower's conflicting tail).
        self._file.fsync()
        del self._offsets[first:], self._idx[first:], self._terms[first:]
        self._version += 1  # views made before may name cut entries
        if first == 0:
            self._head = None
        self._forget_recent()  # the indexes cut may come back with other entries
        self._dirty = False  # what is left was just fsynced

    def deleteEntriesTo(self, entryTo) -> None:  # noqa: N802, N803 - compaction, after a snapshot
        """Drop the entries before position ``entryTo`` (``log = log[entryTo:]``)."""
        count = len(self._offsets)
        keep = slice(entryTo).indices(count)[1]
        if keep == 0:
            return
        start = self._offsets[keep] if keep < count else self._file.length
        self._replace_file(self._copy(start, self._file.length))
        shift = start - MAGIC_SIZE
        self._offsets = array("Q", (offset - shift for offset in self._offsets[keep:]))
        del self._idx[:keep], self._terms[:keep]
        self.bytes = self._file.length - MAGIC_SIZE - len(self._offsets) * ENTRY_OVERHEAD
        self._head = None  # the recent entries are still what their indexes name

    def clear(self) -> None:  # a snapshot was installed in the log's place
        if self._idx:
            first, last = self._idx[0], self._idx[-1]
            log.info("%s: cleared for a snapshot, entries %d..%d dropped", self.path, first, last)
        self._replace_file(())
        self._offsets, self._idx, self._terms = array("Q"), array("Q"), array("Q")
        self.bytes = 0
        self._head = None
        self._forget_recent()

    def _copy(self, start: int, end: int) -> Iterator[bytes]:
        for pos in range(start, end, READ_CHUNK):
            yield self._file.read(pos, min(READ_CHUNK, end - pos))

    def _replace_file(self, frames: Iterable[bytes]) -> None:
        """The journal becomes the magic then ``frames``: tmp, fsync, rename, folder fsyncs."""
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(JOURNAL_MAGIC)
                for chunk in frames:
                    f.write(chunk)
                f.flush()
                fsync(f.fileno(), tmp)
                length = f.tell()
        except OSError as e:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            write_failed(tmp, e)
        # The rule: a snapshot's rename (same folder) is durable before the entries it
        # replaced are dropped.
        fsync_dir(self.folder)
        os.replace(tmp, self.path)
        fsync_dir(self.folder)
        if self._file is not None:
            self._file.close()
            self._file = AppendFile(self.path, length)
        self._version += 1
        self._dirty = False  # everything the journal holds was just fsynced

    def sync(self) -> bool:
        """fsync what was added or cut since the last sync; nothing if nothing was.
        True when it fsynced."""
        if not self._dirty:
            return False
        self._file.fsync()
        self._dirty = False
        return True

    # -- reading ----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def entry_terms(self):
        """Each entry's term, in log order (read without the commands)."""
        return self._terms

    def __getitem__(self, item):
        if isinstance(item, slice):
            return EntriesView(self, 0, len(self._offsets))[item]
        count = len(self._offsets)
        k = item + count if item < 0 else item
        if not 0 <= k < count:
            raise IndexError("journal index out of range")
        return self._entry(k)

    def __iter__(self) -> Iterator[Entry]:
        return iter(EntriesView(self, 0, len(self._offsets)))

    def term_at(self, idx: int) -> int | None:
        """The term of the entry with Raft index ``idx``, if the journal holds it (no read)."""
        if not self._idx:
            return None
        k = idx - self._idx[0]  # indexes are consecutive
        return self._terms[k] if 0 <= k < len(self._idx) and self._idx[k] == idx else None

    @property
    def last_idx(self) -> int:
        return self._idx[-1] if self._idx else 0

    def _entry(self, k: int) -> Entry:
        if k == 0 and self._head is not None:
            return self._head
        entry = self._recent.get(self._idx[k])
        if entry is None:
            start, end = self._span(k)
            entry = self._decode(memoryview(self._file.read(start, end - start)), 0, k)
        if k == 0:
            self._head = entry
        return entry

    def _span(self, k: int) -> tuple[int, int]:
        """Where entry ``k``'s frame starts and ends in the file."""
        stop = self._offsets[k + 1] if k + 1 < len(self._offsets) else self._file.length
        return self._offsets[k], stop

    def _decode(self, buf: memoryview, at: int, k: int) -> Entry:
        """Entry ``k`` from its frame at ``buf[at:]``, checked against its crc, index and term."""
        start, end = self._span(k)
        size = end - start
        if at + size > len(buf):
            raise CorruptLogError(self.path, start, "entry runs past the end of the file")
        payload = buf[at + FRAME_HEAD.size : at + size - FRAME_TAIL.size]
        (n,) = FRAME_HEAD.unpack_from(buf, at)
        crc, n2 = FRAME_TAIL.unpack_from(buf, at + size - FRAME_TAIL.size)
        if n != n2 or n != len(payload) or crc != zlib.crc32(payload):
            raise CorruptLogError(self.path, start)
        idx, term = ENTRY_HEAD.unpack_from(payload)
        if idx != self._idx[k] or term != self._terms[k]:
            raise CorruptLogError(self.path, start, "index or term differs from the one read on open")
        return bytes(payload[ENTRY_HEAD.size :]), idx, term

    def _read_range(self, first: int, stop: int, version: int) -> Iterator[Entry]:
        """Entries ``[first, stop)``: from memory when held, otherwise read in chunks."""
        k = first
        while k < stop:
            self._check_view(version)
            entry = self._recent.get(self._idx[k])
            if entry is not None:
                yield entry
                k += 1
                continue
            chunk_start = self._offsets[k]
            end = self._chunk_end(k, stop)
            buf = memoryview(self._file.read(chunk_start, self._span(end - 1)[1] - chunk_start))
            entries = [self._decode(buf, self._offsets[m] - chunk_start, m) for m in range(k, end)]
            yield from entries
            k = end

    def _chunk_end(self, k: int, stop: int) -> int:
        """Entries from ``k`` to read in one go: not held, within ``READ_CHUNK`` (one at least)."""
        limit, end = self._offsets[k] + READ_CHUNK, k + 1
        while end < stop and self._span(end)[1] <= limit and self._idx[end] not in self._recent:
            end += 1
        return end

    def _check_view(self, version: int) -> None:
        if version != self._version:
            raise StaleJournalViewError(f"{self.path}: a view read after the journal was cut or rewritten")

    def _remember(self, entry: Entry) -> None:
        recent = self._recent
        recent[entry[1]] = entry
        self._recent_held += len(entry[0])
        while self._recent_held > self.recent_bytes and len(recent) > 1:
            oldest = next(iter(recent))
            self._recent_held -= len(recent.pop(oldest)[0])

    def _forget_recent(self) -> None:
        self._recent.clear()
        self._recent_held = 0

    # -- term, vote and commit index (journal.meta) -----------------------------------

    def setRaftCommitIndex(self, raftCommitIndex) -> None:  # noqa: N802, N803
        self._meta["raftCommitIndex"] = raftCommitIndex
        self._meta_saved = False

    def getRaftCommitIndex(self) -> int:  # noqa: N802
        return self._meta.get("raftCommitIndex", 1)

    def setCurrentTerm(self, term, votedForNodeId) -> None:  # noqa: N802, N803
        self._meta["currentTerm"] = term
        self._meta["votedForNodeId"] = votedForNodeId
        write_meta(self.meta_path, self._meta)  # durable before any message that reflects it
        self._meta_saved = True

    def getCurrentTerm(self) -> int:  # noqa: N802
        return self._meta.get("currentTerm", 0)

    def getVotedForNodeId(self):  # noqa: N802
        return self._meta.get("votedForNodeId", None)

    def onOneSecondTimer(self) -> None:  # noqa: N802
        if not self._meta_saved:
            self.sync()  # the commit index never names entries that are not on disk
            write_meta(self.meta_path, self._meta)
            self._meta_saved = True

    def _destroy(self) -> None:
        self.close()

    def close(self) -> None:
        if self._file is not None:
            self.sync()
            self._file.close()
            self._file = None


class EntriesView(Sequence):
    """Entries ``[start, stop)`` of a journal, read only when touched.

    Valid until the journal is cut or rewritten (appends are fine); reading it after
    that raises :class:`StaleJournalViewError`. It pickles as a list of entries, which
    is what pysyncobj sends to a follower.
    """

    __slots__ = ("_journal", "_start", "_stop", "_version")

    def __init__(self, journal: DiskJournal, start: int, stop: int) -> None:
        self._journal = journal
        self._start = start
        self._stop = stop
        self._version = journal._version

    def __len__(self) -> int:
        return self._stop - self._start

    def __getitem__(self, item):
        positions = range(self._start, self._stop)[item]
        if isinstance(positions, int):
            self._journal._check_view(self._version)
            return self._journal._entry(positions)
        if positions.step == 1:
            view = EntriesView(self._journal, positions.start, max(positions.start, positions.stop))
            view._version = self._version
            return view
        return [self[k - self._start] for k in positions]

    def __iter__(self) -> Iterator[Entry]:
        return self._journal._read_range(self._start, self._stop, self._version)

    def __eq__(self, other) -> bool:
        if isinstance(other, EntriesView | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # a mutable journal's view, like a list

    def __reduce__(self):
        return list, (list(self),)

    def __repr__(self) -> str:
        return f"EntriesView({self._journal.path!r}, {self._start}, {self._stop})"


def _frame(command: bytes, idx: int, term: int) -> bytes:
    return frame(ENTRY_HEAD.pack(idx, term) + command)


def _starts_with(path: str, prefix: bytes) -> bool:
    with open(path, "rb") as f:
        return f.read(len(prefix)) == prefix


def read_meta(path: str) -> dict:
    """pysyncobj's meta file. Missing: a new node. Unreadable: refused, as it holds the vote."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return {}
    try:
        meta = loads(data)
    except Exception as e:  # noqa: BLE001 - pickle raises many kinds
        raise CorruptLogError(path, 0, f"unreadable Raft meta: {e!r}") from e
    if not isinstance(meta, dict):
        raise CorruptLogError(path, 0, "Raft meta is not a dict")
    return meta


def write_meta(path: str, meta: dict) -> None:
    """Temp file, fsync, rename, folder fsync: the meta is never torn, and never older.
    A failed write ends the process (storage/durable.py): pysyncobj has taken the term or
    vote in memory already."""
    try:
        with open(path + ".tmp", "wb") as f:
            f.write(dumps(meta))
            f.flush()
            fsync(f.fileno(), path + ".tmp")
    except OSError as e:
        write_failed(path + ".tmp", e)
    os.replace(path + ".tmp", path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))
