"""One node process per data folder: an exclusive lock on ``<data_dir>/lock``.

Two processes on one folder (a second start while the first still runs, a supervisor's
restart that did not wait, a volume mounted into two containers) would both append to
the Raft journal and the store, and damage both without a word. ``horologe node`` takes
an exclusive ``flock`` on ``<data_dir>/lock`` before it opens anything else and holds it
for as long as its process lives: the kernel lets go of it when the process ends, however
it ends, so a crash leaves nothing to clean up. The file holds the pid of the process
that holds the lock, for the refusal's message; its content is never trusted otherwise.
"""

from __future__ import annotations

import fcntl
import os

from .errors import DataDirInUseError, DataDirUnusableError


def lock_data_dir(data_dir: str) -> int:
    """Take the folder's lock (created with the folder if missing); return the descriptor
    that holds it, to keep open. Raises :class:`DataDirInUseError` when another process
    holds it, :class:`DataDirUnusableError` when it is a file or cannot be made or opened."""
    if os.path.exists(data_dir) and not os.path.isdir(data_dir):
        raise DataDirUnusableError(f"data_dir {data_dir} is a file, not a folder")
    try:
        os.makedirs(data_dir, exist_ok=True)
        fd = os.open(os.path.join(data_dir, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise DataDirUnusableError(f"data_dir {data_dir} cannot be used: {e.strerror} ({e.filename})") from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        why = f"data_dir {data_dir} is in use by another node process (pid {holder})"
        raise DataDirInUseError(why) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def lock_holder(data_dir: str) -> str | None:
    """The pid (as the lock file says) of the node process holding the folder's lock, or
    None when no process holds it. Takes nothing and writes nothing: a look before a start
    (horologe local-cluster) that must not touch a running cluster's files."""
    try:
        fd = os.open(os.path.join(data_dir, "lock"), os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # let go of by the close below
    except BlockingIOError:
        return os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
    finally:
        os.close(fd)
    return None
