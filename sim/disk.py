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
file system that extended the file but never wrote the block leaves). A file rewritten
below its synced length goes back to its synced bytes whole.
"""

from __future__ import annotations

import os
import random
import stat

DROP, TEAR, ZERO = "drop", "tear", "zero"


class SyncedDisk:
    def __init__(self) -> None:
        self._synced: dict[tuple[int, int], bytes] = {}
        self._real_fsync = os.fsync

    def install(self, folder: str) -> None:
        """From now on (until :meth:`uninstall`), every fsync of this process records what
        it made durable. ``folder``, where the nodes' files are, must be on tmpfs: other
        file systems reuse the inode numbers of removed files, which key the records."""
        fstype = _fstype(folder)
        if fstype != "tmpfs":
            raise RuntimeError(f"power loss needs the simulator's folder on tmpfs; {folder} is on {fstype}")
        os.fsync = self.fsync

    def uninstall(self) -> None:
        os.fsync = self._real_fsync

    def fsync(self, fd: int) -> None:
        self._real_fsync(fd)
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):  # read through a descriptor of its own: fd may be write-only
            reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
            try:
                self._synced[(st.st_dev, st.st_ino)] = os.pread(reader, st.st_size, 0)
            finally:
                os.close(reader)

    def lose_power(self, folder: str, rng: random.Random) -> list[str]:
        """Every regular file under ``folder`` back to its durable bytes (the process that
        wrote them is gone); what changed, one line per file, in path order."""
        changed = []
        for path in sorted(_files_under(folder)):
            st = os.stat(path)
            synced = self._synced.get((st.st_dev, st.st_ino), b"")
            with open(path, "r+b") as f:
                now = f.read()
                if now == synced:
                    continue
                kept, how = synced, DROP
                if len(now) > len(synced) and now.startswith(synced):
                    how = rng.choice((DROP, TEAR, ZERO))
                    extra = len(now) - len(synced)
                    if how == TEAR:
                        kept = now[: len(synced) + rng.randrange(0, extra)]
                    elif how == ZERO:
                        kept = synced + bytes(extra)
                f.seek(0)
                f.write(kept)
                f.truncate(len(kept))
            if kept != synced:  # what the disk holds now is what a restart finds: as if synced
                self._synced[(st.st_dev, st.st_ino)] = kept
            changed.append(f"{os.path.relpath(path, folder)}: {len(now)} -> {len(kept)} bytes ({how})")
        return changed


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


def _files_under(folder: str):
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                yield path
