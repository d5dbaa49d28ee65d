"""Every fsync of Horologe goes through :func:`fsync` here; one that fails ends the process.

Why not retry ("fsyncgate", PostgreSQL 2018): when writeback fails, Linux reports the
error to an fsync once, and may have dropped the dirty pages or marked them clean. A
second fsync then succeeds without writing them, and an inode evicted while no fd held
it loses the error altogether. After a failed fsync no later one can be trusted: the
node would acknowledge Raft entries, or name store bytes in a sync point, that are not
on disk. So, as PostgreSQL does since then (it PANICs), a failed fsync, whatever its
errno (ENOSPC and EIO alike), is logged CRITICAL with the file and the errno and the
process ends at once with :data:`FSYNC_FAILED_EXIT`, through ``os._exit``: an exit no
``except`` on any thread can swallow (pysyncobj's tick thread catches every exception a
tick raises, logs it and runs the tick again, and ``SystemExit`` would end only that
thread). A restart reads back only what is on disk: the Raft journal's torn tail is
cut, the store drops what follows its last sync point, and Raft replays the rest or
the leader sends it.

The failure is also sticky: once one fsync failed, every later call fails the same way
without calling fsync. That only matters where ``os._exit`` was replaced (tests); then
:class:`~horologe.storage.errors.FsyncFailedError` is raised.

An offline tool that makes a folder whole or not at all (a backup's receive, a restore:
cluster/backup/) runs in :func:`offline`: there a failure raises FsyncFailedError, and the
tool removes what it made and says what failed; nothing serves on from its memory.

``tests/storage/test_fsync_fatal.py`` checks that no other module calls ``os.fsync``.

A failed *write* of the Raft journal or its meta (term, vote, commit index) ends the
process the same way (:func:`write_failed`, called by cluster/raft/journal.py): pysyncobj
changes its own state around those writes (a new term taken before its vote is written, a
membership change made before its entry is appended, a follower's entries appended in
part) and its tick thread catches what a tick raises and ticks again, so the node would
serve on from a state its disk does not hold (tests/sim: a leader whose write of a new
term failed went on leading at that term, beside the node elected in it). A restart
reads back what is on disk. The store's own writes do not end the process: a batch that
fails is rolled back whole and the replica halts (cluster/state_machine.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator

from .errors import FsyncFailedError

log = logging.getLogger(__name__)

FSYNC_FAILED_EXIT = 74  # EX_IOERR of sysexits.h: an I/O error on some file

_failed: FsyncFailedError | None = None  # the first failure of this process, once there was one
_offline = threading.local()  # .on in offline(), on its thread: a failure raises, not remembered


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Within it, on this thread, a failed fsync or write of Raft state raises
    FsyncFailedError instead of ending the process (module docstring): for an offline
    tool's run, not a node's (another thread's fsyncs are as they were)."""
    was = getattr(_offline, "on", False)
    _offline.on = True
    try:
        yield
    finally:
        _offline.on = was


def _is_offline() -> bool:
    return getattr(_offline, "on", False)


def fsync(fd: int, path: str) -> None:
    """fsync ``fd`` (open on ``path``, named in the log line); the process ends if it fails."""
    global _failed
    if _failed is not None and not _is_offline():
        _fatal(_failed)
    try:
        os.fsync(fd)
    except OSError as e:
        if _is_offline():
            raise FsyncFailedError(path, e.errno, e.strerror) from e
        _failed = FsyncFailedError(path, e.errno, e.strerror)
        _fatal(_failed)


def fsync_dir(path: str) -> None:
    """fsync a folder (its entries: files created, renamed or removed in it)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsync(fd, path)
    finally:
        os.close(fd)


def fsync_file(path: str) -> None:
    """fsync the file at ``path`` through a new fd, for a file no fd of ours wrote (an
    extracted snapshot's): an fd that wrote a file should fsync it itself, since an error
    of writeback is reported to the fds open when it happened."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fsync(fd, path)
    finally:
        os.close(fd)


def write_failed(path: str, error: Exception) -> None:
    """A write of Raft state to ``path`` failed with ``error`` (an OSError, or the
    StorageFullError of a short write): the process ends (module docstring)."""
    errno = getattr(error.__cause__ or error, "errno", None)
    if _is_offline():
        raise FsyncFailedError(path, errno, getattr(error, "strerror", None) or str(error)) from error
    log.critical(
        "write of %s failed: %s; the node's Raft state in memory is not what its disk holds: "
        "exiting with status %d so that a restart reads back what is on disk",
        path,
        error,
        FSYNC_FAILED_EXIT,
    )
    os._exit(FSYNC_FAILED_EXIT)
    raise FsyncFailedError(path, errno, str(error)) from error  # reached only where os._exit was replaced


def failed() -> FsyncFailedError | None:
    """The fsync failure of this process, if there was one (only seen where ``os._exit``
    was replaced)."""
    return _failed


def forget_failure() -> None:
    """Forget this process's fsync failure: only for a process that replaced ``os._exit``
    and goes on running other nodes after one ended (the simulator, sim/disk.py: the node
    whose fsync failed is down, and the others' fsyncs must not fail for it)."""
    global _failed
    _failed = None


def _fatal(err: FsyncFailedError) -> None:
    log.critical(
        "fsync of %s failed: errno %s (%s); the data may not be on disk and no later fsync "
        "can tell: exiting with status %d so that a restart replays from what is on disk",
        err.path,
        err.errno,
        err.strerror,
        FSYNC_FAILED_EXIT,
    )
    os._exit(FSYNC_FAILED_EXIT)
    raise err  # reached only where os._exit was replaced (tests)
