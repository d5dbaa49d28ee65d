"""The simulated disk: what each file held at its last fsync, and a power loss that keeps
only that.

Every fsync of the process goes through ``os.fsync`` (storage/durable.py is its only
caller, tests/storage/test_fsync_fatal.py keeps it so); once :meth:`SyncedDisk.install`
ran, an fsync of a regular file also records the file's bytes, keyed by its inode (the
sim's folders are on tmpfs, whose inode numbers are not reused within a run). The model
is LazyFS's (chaos_tests/lazyfs.py): file *contents* are durable only once fsynced;
creating, renaming and removing files are durable at once.

:meth:`lose_power` puts every regular file under a folder back to its last fsynced bytes
(empty if it was never fsynced), in place, so the inode and its hard links stay. What was
written past them is, per file, drawn from the seed: dropped, torn (a prefix of it kept,
as a write cut mid-sector may leave) or zeroed (its length kept, its bytes zero, as a
file system that extended the file but never wrote the block leaves); with
``--out-of-order`` also kept sector by sector, a draw each (a disk's cache and the
kernel's write-back keep no order: a later sector on disk, an earlier one zeros). A file
rewritten below its synced length goes back to its synced bytes whole.

:meth:`fail_fsync` arms a node's folder so that its k-th fsync from now fails (EIO or
ENOSPC), once, as Linux reports a failed write-back once ("fsyncgate"): the file's dirty
pages (here: its bytes past what was synced) are marked clean without reaching the disk,
so a later fsync that succeeds does not write them, and they stay a hole (zeros) in what
the disk holds. storage/durable.py then ends the process through ``os._exit``, which
:meth:`install` replaced by :meth:`_exit`: it raises :class:`ProcessExit` to unwind the
node's step and records which node went (:meth:`take_exited`, read after every step, also
when something caught the exception).

:meth:`fail_write` arms a node's folder so that its k-th write from now (``os.write``,
``os.pwrite``, or the raw write under a file object that :func:`open` or tarfile opened
for writing under the run's folder) puts a prefix of its bytes in the page cache and then
fails: it returns that short count (the caller's next write gets the error) or, with no
byte written, raises ENOSPC or EIO; every later write under the folder fails the same way
until :meth:`disarm` (a disk full, or failing, until the fault ends). Fsyncs still
succeed. :meth:`crash_at_write` instead ends the process in its k-th write, with that
prefix of the write in the page cache (:class:`ProcessExit`, :meth:`take_crashed`); from
then on, until the world took it down, whatever the dead process still writes or fsyncs
there (a bare ``except`` in pysyncobj swallows the exception) raises it again and changes
nothing.
"""

from __future__ import annotations

import builtins
import io
import os
import random
import stat
import tarfile
from collections.abc import Callable
from dataclasses import dataclass

from horologe.storage import durable
from horologe.storage.framing import SECTOR

DROP, TEAR, ZERO, SECTORS = "drop", "tear", "zero", "sectors"


class ProcessExit(BaseException):  # noqa: N818 - as SystemExit: not an error of the caller's
    """A node's process ended (``os._exit``) in the middle of a step."""


@dataclass
class _WriteFault:
    left: int  # writes before the one that fails (counted down)
    errno: int | None  # None: the process crashes in that write
    kept: float  # the fraction of that write's bytes that reaches the page cache
    power: bool = False  # the crash is a power loss too (read by the world)


class SyncedDisk:
    def __init__(self) -> None:
        self._synced: dict[tuple[int, int], bytes] = {}
        self._real_fsync = os.fsync
        self._real_exit = os._exit  # what a process exit that is not a node's calls
        self._saved_exit = os._exit  # what uninstall puts back, whatever _real_exit became
        self._armed: dict[str, list[int]] = {}  # folder -> [fsyncs left before one fails, errno]
        self._lost: dict[tuple[int, int], tuple[int, int]] = {}  # file -> [lo, hi) a failed fsync lost
        self._failure: tuple[str, str] | None = None  # (folder, file) of the fsync that just failed
        self._exited: list[tuple[str, str]] = []  # the same, for each process that exited since taken
        self._root = ""  # the run's folder: files opened for writing under it are watched
        self._real_write, self._real_pwrite = os.write, os.pwrite
        self._real_open, self._real_tar_open = builtins.open, tarfile.bltn_open
        self._write_armed: dict[str, _WriteFault] = {}  # folder -> its k-th write fails or crashes
        self._failing: dict[str, int] = {}  # folder -> errno of every write there, until disarmed
        self._dead: dict[str, tuple[str, bool]] = {}  # folder -> (file, power) of a crash in a write
        # folder -> (file, the size past which an fsync of that file ends the process)
        self._fsync_crash: dict[str, tuple[str, int]] = {}
        self.write_errors = 0  # writes failed so far (short or raised): the world's step reads it
        self._write_failure: tuple[str, str] | None = None  # (folder, file) of this step's failed write

    def install(self, folder: str) -> None:
        """From now on (until :meth:`uninstall`), every fsync of this process records what
        it made durable. ``folder``, where the nodes' files are, must be on tmpfs: other
        file systems reuse the inode numbers of removed files, which key the records."""
        fstype = _fstype(folder)
        if fstype != "tmpfs":
            raise RuntimeError(f"power loss needs the simulator's folder on tmpfs; {folder} is on {fstype}")
        self._root = os.path.realpath(folder)
        os.fsync = self.fsync
        os._exit = self._exit
        os.write, os.pwrite = self._write, self._pwrite
        builtins.open = tarfile.bltn_open = self._open

    def durable(self, path: str) -> bytes | None:
        """What of the file at ``path`` a power loss would leave (its fsynced bytes); None
        when the disk is not installed (no power loss in this run: what a file holds, it
        keeps)."""
        if not self._root:
            return None
        st = os.stat(path)
        return self._synced.get((st.st_dev, st.st_ino), b"")

    def uninstall(self) -> None:
        os.fsync = self._real_fsync
        os._exit = self._saved_exit
        os.write, os.pwrite = self._real_write, self._real_pwrite
        builtins.open, tarfile.bltn_open = self._real_open, self._real_tar_open

    def fail_fsync(self, folder: str, after: int, errno: int) -> None:
        """The ``after``-th fsync from now of a file under ``folder`` fails, once, with
        ``errno``."""
        self._armed[os.path.realpath(folder)] = [after, errno]

    def fail_write(self, folder: str, after: int, errno: int, kept: float) -> None:
        """The ``after``-th write from now of a file under ``folder`` writes ``kept`` of its
        bytes (a fraction, rounded down) and fails with ``errno``; so does every later one
        there, until :meth:`disarm`."""
        self._write_armed[os.path.realpath(folder)] = _WriteFault(after, errno, kept)

    def crash_at_write(self, folder: str, after: int, kept: float, power: bool) -> None:
        """The process writing under ``folder`` ends in its ``after``-th write from now,
        ``kept`` of that write's bytes in the page cache (``power``: the world then takes
        the power too)."""
        self._write_armed[os.path.realpath(folder)] = _WriteFault(after, None, kept, power)

    def crash_at_fsync(self, folder: str, file: str, longer_than: int) -> None:
        """The process writing under ``folder`` ends as it calls fsync on ``file`` (a path
        under ``folder``) once that file is longer than ``longer_than`` bytes, before the
        fsync: what it wrote since its last one stays in the page cache."""
        self._fsync_crash[os.path.realpath(folder)] = (file, longer_than)

    def disarm(self, folder: str) -> None:
        folder = os.path.realpath(folder)
        self._armed.pop(folder, None)
        self._write_armed.pop(folder, None)
        self._failing.pop(folder, None)
        self._fsync_crash.pop(folder, None)

    def ended(self, folder: str) -> bool:
        """Whether the process writing under ``folder`` ended in this step (in a write, or
        on a failed fsync), not yet taken."""
        folder = os.path.realpath(folder)
        return folder in self._dead or any(f == folder for f, _ in self._exited)

    def take_crashed(self) -> list[tuple[str, str, bool]]:
        """(folder, file, power) of each node whose process ended in a write since the last
        call; its folder takes writes again."""
        crashed = [(folder, path, power) for folder, (path, power) in self._dead.items()]
        self._dead.clear()
        self._write_failure = None
        return crashed

    def _watched(self, path: str) -> str | None:
        """The armed, failing or dead folder ``path`` is in, if any."""
        for folders in (self._dead, self._failing, self._write_armed):
            for folder in folders:
                if _inside(path, folder):
                    return folder
        return None

    def _written(self, path: str, data, write: Callable) -> int:
        """One write of ``data`` to the file at ``path`` (``write`` makes it): whole, or as
        an armed fault has it."""
        folder = self._watched(path)
        if folder is None:
            return write(data)
        if folder in self._dead:
            raise ProcessExit(1)  # the process is gone: nothing it does reaches the disk
        err = self._failing.get(folder)
        if err is not None:
            self.write_errors += 1
            self._write_failure = (folder, os.path.relpath(path, folder))
            raise OSError(err, os.strerror(err))
        fault = self._write_armed[folder]
        fault.left -= 1
        if fault.left > 0:
            return write(data)
        del self._write_armed[folder]
        view = memoryview(data).cast("B")
        kept = int(len(view) * fault.kept)
        if kept:
            kept = write(view[:kept])
        if fault.errno is None:
            self._dead[folder] = (os.path.relpath(path, folder), fault.power)
            raise ProcessExit(1)
        self._failing[folder] = fault.errno
        self.write_errors += 1
        self._write_failure = (folder, os.path.relpath(path, folder))
        if kept:
            return kept  # a short write: the next one gets the error
        raise OSError(fault.errno, os.strerror(fault.errno))

    def _write(self, fd: int, data) -> int:
        if not (self._dead or self._failing or self._write_armed):
            return self._real_write(fd, data)
        return self._written(_fd_path(fd), data, lambda b: self._real_write(fd, b))

    def _pwrite(self, fd: int, data, offset: int) -> int:
        if not (self._dead or self._failing or self._write_armed):
            return self._real_pwrite(fd, data, offset)
        return self._written(_fd_path(fd), data, lambda b: self._real_pwrite(fd, b, offset))

    def _open(self, file, mode="r", buffering=-1, *args, **kwargs):
        """``open``: a binary file opened for writing under the run's folder writes through
        :class:`_WatchedFile`, whose raw writes :meth:`_written` sees."""
        writes = any(c in mode for c in "wax+") and "b" in mode
        if not writes or args or kwargs or not isinstance(file, str | bytes | os.PathLike):
            return self._real_open(file, mode, buffering, *args, **kwargs)
        path = os.path.realpath(file)
        if not _inside(path, self._root):
            return self._real_open(file, mode, buffering)
        raw = _WatchedFile(file, mode.replace("t", ""), disk=self, path=path)
        if buffering == 0:
            return raw
        size = buffering if buffering > 1 else io.DEFAULT_BUFFER_SIZE
        return io.BufferedRandom(raw, size) if "+" in mode else io.BufferedWriter(raw, size)

    def take_exited(self) -> list[tuple[str, str]]:
        """(folder, file) of each node whose process exited since the last call, because
        an fsync of that file failed (the folder as :func:`os.path.realpath` gives it)."""
        exited, self._exited = self._exited, []
        if exited:
            durable.forget_failure()  # the process it was sticky for is gone: the others run on
        return exited

    def fsync(self, fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if self._dead and any(_inside(path, f) for f in self._dead):
            raise ProcessExit(1)  # the process ended in a write: it syncs nothing more
        st = os.fstat(fd)
        crash = next((f for f in self._fsync_crash if _inside(path, f)), None)
        if crash is not None:
            file, longer_than = self._fsync_crash[crash]
            if os.path.relpath(path, crash) == file and st.st_size > longer_than:
                del self._fsync_crash[crash]
                self._dead[crash] = (file, False)
                raise ProcessExit(1)
        key = (st.st_dev, st.st_ino)
        folder = next((f for f in self._armed if _inside(path, f)), None)
        if folder is not None:
            self._armed[folder][0] -= 1
            if self._armed[folder][0] <= 0:
                err = self._armed.pop(folder)[1]
                self._failure = (folder, os.path.relpath(path, folder))
                if stat.S_ISREG(st.st_mode) and st.st_size > len(self._synced.get(key, b"")):
                    self._lost[key] = (len(self._synced.get(key, b"")), st.st_size)
                raise OSError(err, os.strerror(err))
        self._real_fsync(fd)
        if stat.S_ISREG(st.st_mode):  # read through a descriptor of its own: fd may be write-only
            reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
            try:
                data = os.pread(reader, st.st_size, 0)
            finally:
                os.close(reader)
            lo, hi = self._lost.get(key, (0, 0))
            if len(data) <= lo:  # cut back below what was lost: rewritten since
                self._lost.pop(key, None)
            elif lo < hi:  # marked clean, never written: a hole on the disk
                hi = min(hi, len(data))
                data = data[:lo] + bytes(hi - lo) + data[hi:]
            self._synced[key] = data

    def _exit(self, status: int) -> None:
        """``os._exit`` of a node: only storage/durable.py calls it, on a failed fsync, or
        on a failed write of Raft state (then the process goes down as a crash leaves it:
        the page cache keeps what was written, the failed write's prefix too)."""
        if self._failure is not None:
            self._exited.append(self._failure)
            self._failure = None
        elif self._write_failure is not None:
            folder, path = self._write_failure
            self._dead[folder] = (path, False)
        elif not self._exited:
            self._real_exit(status)  # not a node's failed fsync or write: nothing the simulator made
        # else the node that exited in this step again: something caught its ProcessExit
        # (pysyncobj's bare except around loading a dump) and it ran on to its next fsync
        raise ProcessExit(status)

    def lose_power(self, folder: str, rng: random.Random, out_of_order: bool = False) -> list[str]:
        """Every regular file under ``folder`` back to its durable bytes (the process that
        wrote them is gone); what changed, one line per file, in path order. The page cache
        goes too: pages a failed fsync left marked clean are no longer there to be skipped,
        and what a restart writes over them reaches the disk at its next fsync.
        ``out_of_order``: what was written past them may also be kept sector by sector, each
        drawn (``SECTORS``: a disk's cache and the kernel's write-back keep no order), its
        length kept and the sectors not kept zero."""
        changed = []
        for path in sorted(_files_under(folder)):
            st = os.stat(path)
            self._lost.pop((st.st_dev, st.st_ino), None)
            synced = self._synced.get((st.st_dev, st.st_ino), b"")
            with self._real_open(path, "r+b") as f:
                now = f.read()
                if now == synced:
                    continue
                kept, how = synced, DROP
                if len(now) > len(synced) and now.startswith(synced):
                    how = rng.choice((DROP, TEAR, ZERO, SECTORS) if out_of_order else (DROP, TEAR, ZERO))
                    extra = len(now) - len(synced)
                    if how == TEAR:
                        kept = now[: len(synced) + rng.randrange(0, extra)]
                    elif how == ZERO:
                        kept = synced + bytes(extra)
                    elif how == SECTORS:
                        kept = _some_sectors(now, len(synced), rng)
                f.seek(0)
                f.write(kept)
                f.truncate(len(kept))
            if kept != synced:  # what the disk holds now is what a restart finds: as if synced
                self._synced[(st.st_dev, st.st_ino)] = kept
            changed.append(f"{os.path.relpath(path, folder)}: {len(now)} -> {len(kept)} bytes ({how})")
        return changed


def _some_sectors(now: bytes, synced: int, rng: random.Random) -> bytes:
    """``now`` with each sector past ``synced`` bytes kept or zeroed, one draw each (the
    synced bytes of the first stay)."""
    kept = bytearray(now)
    for lo in range(synced // SECTOR * SECTOR, len(now), SECTOR):
        if rng.random() < 0.5:
            start = max(lo, synced)
            kept[start : lo + SECTOR] = bytes(min(lo + SECTOR, len(now)) - start)
    return bytes(kept)


class _WatchedFile(io.FileIO):
    """A file opened for writing under the run's folder: its raw writes (what a buffered
    file object's flush makes) go through :meth:`SyncedDisk._written`."""

    def __init__(self, file, mode: str, *, disk: SyncedDisk, path: str) -> None:
        super().__init__(file, mode)
        self._disk = disk
        self._path = path

    def write(self, data) -> int:
        return self._disk._written(self._path, data, super().write)


def _fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def _fstype(path: str) -> str:
    """The type of the file system ``path`` is on (its longest mount point in /proc/mounts)."""
    path = os.path.realpath(path)
    best, fstype = "", "?"
    with open("/proc/self/mounts") as f:
        for line in f:
            _dev, mount, kind = line.split()[:3]
            inside = path == mount or path.startswith(mount.rstrip("/") + "/")
            if inside and len(mount) >= len(best):
                best, fstype = mount, kind
    return fstype


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + os.sep)


def _files_under(folder: str):
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                yield path
