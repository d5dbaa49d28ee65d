"""LazyFS: a FUSE file system that forgets unsynced file data when the power goes.

In the spirit of Jepsen's LazyFS. A SIGKILL of a node proves little about durability: the
kernel's page cache outlives the process, so data a node wrote but never fsynced still reaches
the disk. Mounted over a backing directory, this file system passes everything through to it,
except that file *contents* written but not yet fsynced live only in the daemon's memory. "Lose
power" throws those away, so the backing directory is left holding exactly what a machine would
find on its disk after a power cut, and a fresh mount over it plays the reboot.

The model
---------
Held in memory until ``fsync`` (lost on power loss):

* file data from ``write()``, including the writes the kernel makes when it writes back the dirty
  pages of a ``MAP_SHARED`` mapping: on ``msync`` (then followed by an fsync), on ``munmap`` (FUSE
  writes a shared mapping back when it goes away, so also when its process is killed), on
  ``close()`` of a descriptor of the file, or by background writeback;
* size changes: ``truncate``/``ftruncate``, ``open(O_TRUNC)``, and growth by writes or ``mmap``
  ``resize``.

``fsync``/``fdatasync``/``msync(MS_SYNC)`` on a file applies its pending data to the backing file
and ``os.fsync``'s it. ``close()`` (FUSE ``flush``/``release``) makes nothing durable.

With ``--out-of-order SEED`` a power loss does not drop all of it: each unsynced sector (512
bytes) reaches the backing file or not, a draw each, as a disk's cache and the kernel's
write-back leave them (a later sector on disk, an earlier one zeros). A file truncated since its
last fsync still loses all of it.

Durable at once (a leniency: a real file system may lose these too unless the directory is
fsynced): creating files, ``mkdir``, ``rmdir``, ``unlink``, ``rename`` (``os.replace`` included),
hard and symbolic links, ``chmod``/``chown``/``utime``. So after a power loss a file that was
created but never fsynced exists, with its fsynced size (empty if it was never fsynced), and a
``rename`` over an old file is never undone. ``fsyncdir`` is therefore a no-op. Modification
times are those of the backing file (writes held in memory do not move them).

The page cache above FUSE
-------------------------
Plain ``write()`` reaches the daemon at once (the writeback cache is off), but the kernel can
hold dirty pages of a live ``mmap`` that the daemon has never seen (once the mapping is gone they
have been written to the daemon). Losing power is therefore:

1. the caller SIGKILLs every process using the mount (that is the caller's job);
2. the daemon turns *powered off*: from now on every write, fsync and setattr is answered with
   success and thrown away, and metadata changes fail with EIO;
3. the daemon unmounts; the kernel writes back its dirty pages on the way, into the void;
4. the daemon drops its in-memory data and exits.

If the unmount fails because something still uses the mount, the daemon detaches it lazily and
closes its FUSE connection, which makes the kernel drop whatever it still holds.

A clean stop (SIGTERM, ``LazyFS.stop``) makes nothing durable either: unsynced data is dropped
exactly as in a power loss. It is the way to tear a mount down, not a simulated clean shutdown.

Inodes are the backing inodes: the daemon holds an O_PATH descriptor on each inode the kernel
knows (so renaming a directory moves nothing here) and keys unsynced data by inode number, so the
hard links of a file share its unsynced data as they share its durable data.

Limits: the mount is meant for root (the daemon opens every backing file read-write); the backing
directory must be one file system and must not be changed behind the mount's back while it is
mounted; ``rename`` flags (``RENAME_NOREPLACE``/``EXCHANGE``) are refused with EINVAL; there are
no extended attributes, ``mknod`` or ``fallocate``.

Use it
------
Daemon::

    python -m chaos_tests.lazyfs BACKING MOUNTPOINT    # SIGUSR1: lose power; SIGTERM: stop

From Python (tests)::

    with LazyFS(backing, mountpoint) as fs:     # spawns the daemon, waits until mounted
        ...                                     # run nodes with their data under mountpoint
        fs.lose_power()                         # after SIGKILLing them; the daemon exits
    with LazyFS(backing, mountpoint) as fs:     # "reboot": a fresh mount over the same backing
        ...
"""

from __future__ import annotations

import argparse
import errno
import functools
import logging
import os
import random
import re
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import pyfuse3
import trio

log = logging.getLogger("lazyfs")

BLOCK = 4096  # granularity of the in-memory overlay: the page size, the unit of mmap writeback
SECTOR = 512  # what a disk writes whole or not at all: the unit of --out-of-order
CACHE_SECONDS = 1.0  # how long the kernel may cache names and attributes
SIG_POWER_OFF = signal.SIGUSR1
SIG_STOP = signal.SIGTERM
SIG_ARM_CUT = signal.SIGUSR2  # lose power right after the next rename onto ``--cut-on-rename-to``


# ---------------------------------------------------------------------------------------------
# The data model: one file's unsynced contents


class Overlay:
    """Unsynced contents of one regular file, laid over the durable bytes of its backing file.

    ``blocks`` hold whole BLOCK-sized pieces of what a reader sees. Where no block covers a byte,
    it is the backing file's byte if it lies below ``floor``, and zero otherwise: ``floor`` is the
    lowest size the file has been truncated to since the last fsync (those backing bytes are
    logically gone). Invariants: floor <= size; no block starts at or past size; block bytes past
    size are zero.
    """

    def __init__(self, fd: int):
        self.fd = fd
        self.size = self.floor = os.fstat(fd).st_size
        self.blocks: dict[int, bytearray] = {}

    def _durable(self, off: int, n: int) -> bytes:
        """n bytes at off as the backing file has them, zeros from floor on."""
        want = max(0, min(n, self.floor - off))
        data = os.pread(self.fd, want, off) if want else b""
        return data.ljust(n, b"\0")  # short at the backing file's end: the rest reads as zeros

    def read(self, off: int, n: int) -> bytes:
        end = min(off + n, self.size)
        parts = []
        pos = off
        while pos < end:
            i = pos // BLOCK
            block = self.blocks.get(i)
            if block is not None:
                stop = min(end, (i + 1) * BLOCK)
                parts.append(bytes(block[pos - i * BLOCK : stop - i * BLOCK]))
            else:
                # One pread for the whole run of blocks the overlay does not hold.
                j = i + 1
                while j * BLOCK < end and j not in self.blocks:
                    j += 1
                stop = min(end, j * BLOCK)
                parts.append(self._durable(pos, stop - pos))
            pos = stop
        return b"".join(parts)

    def write(self, off: int, data: bytes) -> None:
        view = memoryview(data)
        pos, end = off, off + len(data)
        while pos < end:
            i = pos // BLOCK
            block = self.blocks.get(i)
            if block is None:
                block = self.blocks[i] = bytearray(self._durable(i * BLOCK, BLOCK))
            stop = min(end, (i + 1) * BLOCK)
            block[pos - i * BLOCK : stop - i * BLOCK] = view[pos - off : stop - off]
            pos = stop
        self.size = max(self.size, end)

    def truncate(self, size: int) -> None:
        if size < self.size:
            for i in [i for i in self.blocks if i * BLOCK >= size]:
                del self.blocks[i]
            i, keep = divmod(size, BLOCK)
            if keep and i in self.blocks:
                self.blocks[i][keep:] = bytes(BLOCK - keep)
            self.floor = min(self.floor, size)
        # Growing needs nothing: bytes past the old size are zero by the invariants.
        self.size = size

    def apply(self) -> int:
        """Make this overlay the backing file's durable contents; returns the bytes written."""
        os.ftruncate(self.fd, self.floor)  # the truncations first: blocks past floor are rewritten
        written = 0
        for i in sorted(self.blocks):
            written += self._write_back(i * BLOCK, min((i + 1) * BLOCK, self.size))
        os.ftruncate(self.fd, self.size)
        os.fsync(self.fd)
        return written

    def keep_some(self, rng: random.Random) -> int:
        """At a power cut, write each unsynced sector to the backing file or not, a draw
        each (``--out-of-order``: a disk's cache and the kernel's write-back keep no order).
        A sector written past the backing file's end extends it, the sectors before it not
        written reading as zeros. A file truncated since its last fsync keeps nothing: its
        size and the data around it are not drawn apart. Returns the bytes written."""
        if self.floor < os.fstat(self.fd).st_size:
            return 0
        written = 0
        for i in sorted(self.blocks):
            for lo in range(i * BLOCK, min((i + 1) * BLOCK, self.size), SECTOR):
                if rng.random() < 0.5:
                    written += self._write_back(lo, min(lo + SECTOR, self.size))
        return written

    def _write_back(self, start: int, stop: int) -> int:
        """Bytes ``start:stop`` (within one block) from the overlay to the backing file."""
        i = start // BLOCK
        chunk = memoryview(self.blocks[i])[start - i * BLOCK : stop - i * BLOCK]
        pos, written = start, 0
        while chunk:  # pwrite may write less than asked
            n = os.pwrite(self.fd, chunk, pos)
            chunk, pos, written = chunk[n:], pos + n, written + n
        return written


@dataclass
class DataFile:
    """A backing regular file the daemon has open: because a FUSE handle is open on it, or
    because it has unsynced data. Holding ``fd`` also keeps the backing inode, and so its number
    (the key of everything here), from being reused while we still know it."""

    fd: int  # the backing file, opened read-write
    opens: int = 0  # FUSE handles open on it
    overlay: Overlay | None = None


@dataclass
class Known:
    """An inode the kernel has looked up (``lookups`` times and not yet forgotten)."""

    fd: int  # O_PATH descriptor: names the backing inode wherever renames move it
    lookups: int = 0


def _proc(fd: int) -> str:
    """A path that opens, stats or chmods what fd refers to (O_PATH descriptors included)."""
    return f"/proc/self/fd/{fd}"


def _fuse_op(fn):
    """OSError -> the matching FUSE error; anything else is logged and answered with EIO, since an
    exception escaping a handler would end pyfuse3's main loop and leave a dead mount."""

    @functools.wraps(fn)
    async def wrapper(*args, **kwargs):
        try:
            return await fn(*args, **kwargs)
        except pyfuse3.FUSEError:
            raise
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        except Exception:
            log.exception("%s failed", fn.__name__)
            raise pyfuse3.FUSEError(errno.EIO) from None

    return wrapper


# ---------------------------------------------------------------------------------------------
# The FUSE operations


class LazyOperations(pyfuse3.Operations):
    # Off on purpose: with it on, the kernel would also hold plain write()s in its page cache
    # and send them whenever it likes; off, each write() reaches us before it returns.
    enable_writeback_cache = False
    supports_dot_lookup = False  # the kernel then never asks us for "." or ".."

    def __init__(
        self,
        backing: str,
        cut_on_rename_to: str | None = None,
        cut_marker: str | None = None,
        out_of_order: int | None = None,
    ):
        """``cut_on_rename_to``: once armed (SIG_ARM_CUT), the power goes right after a rename
        onto a file of that name, and ``cut_marker`` is created to say so. ``out_of_order``:
        a seed; a power cut then keeps some unsynced sectors (:meth:`Overlay.keep_some`)."""
        super().__init__()
        self.out_of_order = out_of_order
        self.cut_on_rename_to = cut_on_rename_to
        self.cut_marker = cut_marker
        self.cut_armed = False
        root_fd = os.open(backing, os.O_PATH | os.O_DIRECTORY)
        self._root_backing_ino = os.fstat(root_fd).st_ino
        self._known: dict[int, Known] = {pyfuse3.ROOT_INODE: Known(root_fd, 1)}
        self._files: dict[int, DataFile] = {}
        self._dirs: dict[int, tuple[int, list[str]]] = {}  # dir handle -> (inode, listing)
        self._next_dir_handle = 1
        self.powered_off = False
        self.discarded_bytes = 0  # written to us while powered off

    # -- inodes -----------------------------------------------------------------------------

    def _ino(self, backing_ino: int) -> int:
        """FUSE inode numbers are the backing ones, except that FUSE reserves 1 for the root:
        the root's backing number and 1 swap places, which keeps the mapping one-to-one."""
        if backing_ino == self._root_backing_ino:
            return pyfuse3.ROOT_INODE
        if backing_ino == pyfuse3.ROOT_INODE:
            return self._root_backing_ino
        return backing_ino

    def _fd(self, ino: int) -> int:
        """A descriptor on the backing inode: its O_PATH one, or the open file's."""
        if ino in self._known:
            return self._known[ino].fd
        if ino in self._files:
            return self._files[ino].fd
        raise pyfuse3.FUSEError(errno.ENOENT)

    def _learn(self, parent_fd: int, name: str) -> pyfuse3.EntryAttributes:
        """Look name up and count one kernel lookup of it."""
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=parent_fd)
        st = os.fstat(fd)
        ino = self._ino(st.st_ino)
        if ino in self._known:
            os.close(fd)  # another name of a known inode (a hard link), or a repeated lookup
        else:
            self._known[ino] = Known(fd)
        self._known[ino].lookups += 1
        return self._attr(ino, st)

    def _forget(self, ino: int, n: int) -> None:
        known = self._known.get(ino)
        if known is None or ino == pyfuse3.ROOT_INODE:
            return
        known.lookups -= n
        if known.lookups <= 0:
            os.close(known.fd)
            del self._known[ino]

    def _attr(self, ino: int, st: os.stat_result | None = None) -> pyfuse3.EntryAttributes:
        if st is None:
            st = os.stat(self._fd(ino))
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = ino
        entry.generation = 0
        entry.entry_timeout = entry.attr_timeout = CACHE_SECONDS
        for name in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_rdev", "st_blksize"):
            setattr(entry, name, getattr(st, name))
        for name in ("st_atime_ns", "st_mtime_ns", "st_ctime_ns"):
            setattr(entry, name, getattr(st, name))
        overlay = self._overlay_of(ino)
        # Readers (and the kernel, which sizes its page cache and mmaps by it) see pending sizes.
        entry.st_size = overlay.size if overlay else st.st_size
        entry.st_blocks = -(-overlay.size // 512) if overlay else st.st_blocks
        return entry

    # -- file data ---------------------------------------------------------------------------

    def _overlay_of(self, ino: int) -> Overlay | None:
        file = self._files.get(ino)
        return file.overlay if file else None

    def _data_file(self, ino: int) -> DataFile:
        file = self._files.get(ino)
        if file is None:
            file = self._files[ino] = DataFile(os.open(_proc(self._fd(ino)), os.O_RDWR))
        return file

    def _overlay(self, ino: int) -> Overlay:
        file = self._data_file(ino)
        if file.overlay is None:
            file.overlay = Overlay(file.fd)
        return file.overlay

    def _truncate(self, ino: int, size: int) -> None:
        file = self._data_file(ino)
        if file.overlay is None and os.fstat(file.fd).st_size == size:
            return  # nothing changes (e.g. O_TRUNC on an empty file): no overlay to carry around
        self._overlay(ino).truncate(size)

    def _close_if_unneeded(self, ino: int) -> None:
        """Close a backing file nobody has open, unless it holds unsynced data of a file that
        still has a name (the data of a deleted file can never be read or synced again)."""
        file = self._files.get(ino)
        if file is None or file.opens:
            return
        if file.overlay is None or os.fstat(file.fd).st_nlink == 0:
            os.close(file.fd)
            del self._files[ino]

    def _check_power(self) -> None:
        if self.powered_off:
            raise pyfuse3.FUSEError(errno.EIO)

    def pending(self) -> tuple[int, int]:
        """(files, bytes) of unsynced data held in memory."""
        overlays = [f.overlay for f in self._files.values() if f.overlay]
        return len(overlays), sum(len(o.blocks) * BLOCK for o in overlays)

    def power_off(self) -> None:
        self.powered_off = True
        files, nbytes = self.pending()
        log.info("power off: dropping unsynced data (%d files, ~%d bytes)", files, nbytes)
        if self.out_of_order is not None:
            rng = random.Random(self.out_of_order)
            kept = sum(f.overlay.keep_some(rng) for _, f in sorted(self._files.items()) if f.overlay)
            log.info("out of order: %d bytes of unsynced sectors kept, each by its own draw", kept)

    def drop_everything(self) -> None:
        for file in self._files.values():
            os.close(file.fd)
        for known in self._known.values():
            os.close(known.fd)
        self._files.clear()
        self._known.clear()

    # -- names -------------------------------------------------------------------------------

    @_fuse_op
    async def lookup(self, parent_inode, name, ctx=None):
        return self._learn(self._fd(parent_inode), os.fsdecode(name))

    async def forget(self, inode_list):
        for ino, n in inode_list:
            self._forget(ino, n)

    @_fuse_op
    async def getattr(self, inode, ctx=None):
        return self._attr(inode)

    @_fuse_op
    async def setattr(self, inode, attr, fields, fh, ctx):
        if self.powered_off:
            return self._attr(inode)  # accepted, and lost with the power
        if fields.update_size:
            log.debug("truncate ino=%d size=%d", inode, attr.st_size)
            self._truncate(inode, attr.st_size)  # held until fsync, like written data
        path = _proc(self._fd(inode))
        if fields.update_mode:
            os.chmod(path, stat.S_IMODE(attr.st_mode))
        if fields.update_uid or fields.update_gid:
            os.chown(path, attr.st_uid if fields.update_uid else -1, attr.st_gid if fields.update_gid else -1)
        if fields.update_atime or fields.update_mtime:
            old = os.stat(path)
            atime = attr.st_atime_ns if fields.update_atime else old.st_atime_ns
            mtime = attr.st_mtime_ns if fields.update_mtime else old.st_mtime_ns
            os.utime(path, ns=(atime, mtime))
        return self._attr(inode)

    @_fuse_op
    async def readlink(self, inode, ctx):
        return os.fsencode(os.readlink("", dir_fd=self._fd(inode)))

    @_fuse_op
    async def symlink(self, parent_inode, name, target, ctx):
        self._check_power()
        parent_fd = self._fd(parent_inode)
        os.symlink(os.fsdecode(target), os.fsdecode(name), dir_fd=parent_fd)
        return self._learn(parent_fd, os.fsdecode(name))

    @_fuse_op
    async def mkdir(self, parent_inode, name, mode, ctx):
        self._check_power()
        parent_fd = self._fd(parent_inode)
        os.mkdir(os.fsdecode(name), mode & ~ctx.umask, dir_fd=parent_fd)
        return self._learn(parent_fd, os.fsdecode(name))

    @_fuse_op
    async def rmdir(self, parent_inode, name, ctx):
        self._check_power()
        os.rmdir(os.fsdecode(name), dir_fd=self._fd(parent_inode))

    @_fuse_op
    async def unlink(self, parent_inode, name, ctx):
        self._check_power()
        parent_fd, name = self._fd(parent_inode), os.fsdecode(name)
        victim = self._ino(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_ino)
        os.unlink(name, dir_fd=parent_fd)
        self._close_if_unneeded(victim)

    @_fuse_op
    async def rename(self, parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx):
        self._check_power()
        if flags:
            raise pyfuse3.FUSEError(errno.EINVAL)
        old_fd, new_fd = self._fd(parent_inode_old), self._fd(parent_inode_new)
        name_old, name_new = os.fsdecode(name_old), os.fsdecode(name_new)
        try:
            victim = self._ino(os.stat(name_new, dir_fd=new_fd, follow_symlinks=False).st_ino)
        except FileNotFoundError:
            victim = None
        os.rename(name_old, name_new, src_dir_fd=old_fd, dst_dir_fd=new_fd)
        if victim is not None:
            self._close_if_unneeded(victim)  # os.replace over a file drops that file's last name
        if self.cut_armed and name_new == self.cut_on_rename_to:
            self.cut_armed = False
            log.info("power cut right after renaming %s onto %s", name_old, name_new)
            self.power_off()  # the rename is durable (module docstring); nothing after it is
            folder = os.readlink(_proc(new_fd))  # the backing folder the rename happened in
            self._mark(f"cut: {os.path.join(folder, name_old)} -> {name_new}")

    def _mark(self, what: str) -> None:
        if self.cut_marker:
            with open(self.cut_marker, "w") as f:
                f.write(what + "\n")

    @_fuse_op
    async def link(self, inode, new_parent_inode, new_name, ctx):
        self._check_power()
        parent_fd, new_name = self._fd(new_parent_inode), os.fsdecode(new_name)
        # linkat through /proc/self/fd follows the magic link to the inode itself.
        os.link(_proc(self._fd(inode)), new_name, dst_dir_fd=parent_fd, follow_symlinks=True)
        return self._learn(parent_fd, new_name)

    @_fuse_op
    async def statfs(self, ctx):
        st = os.statvfs(_proc(self._known[pyfuse3.ROOT_INODE].fd))
        out = pyfuse3.StatvfsData()
        for name in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree"):
            setattr(out, name, getattr(st, name))
        out.f_favail = st.f_favail
        out.f_namemax = st.f_namemax
        return out

    # -- directories -------------------------------------------------------------------------

    @_fuse_op
    async def opendir(self, inode, ctx):
        handle = self._next_dir_handle
        self._next_dir_handle += 1
        self._dirs[handle] = (inode, [])
        return handle

    @_fuse_op
    async def readdir(self, fh, start_id, token):
        inode, names = self._dirs[fh]
        if start_id == 0:
            # A snapshot per pass, so offsets (index + 1) stay stable while the directory changes.
            names = sorted(os.listdir(_proc(self._fd(inode))))
            self._dirs[fh] = (inode, names)
        parent_fd = self._fd(inode)
        for i in range(start_id, len(names)):
            try:
                attr = self._learn(parent_fd, names[i])  # readdirplus: each entry is a lookup
            except FileNotFoundError:
                continue  # removed since the snapshot
            if not pyfuse3.readdir_reply(token, os.fsencode(names[i]), attr, i + 1):
                self._forget(attr.st_ino, 1)  # not sent after all
                break

    @_fuse_op
    async def releasedir(self, fh):
        self._dirs.pop(fh, None)

    @_fuse_op
    async def fsyncdir(self, fh, datasync):
        pass  # directory changes are applied to the backing directory at once (see the docstring)

    # -- files -------------------------------------------------------------------------------

    @_fuse_op
    async def open(self, inode, flags, ctx):
        file = self._data_file(inode)
        file.opens += 1
        if flags & os.O_TRUNC and not self.powered_off:
            self._truncate(inode, 0)  # the kernel passes O_TRUNC through (atomic_o_trunc)
        # fh is the inode: all handles on a file share one backing descriptor and one overlay.
        return pyfuse3.FileInfo(fh=inode)

    @_fuse_op
    async def create(self, parent_inode, name, mode, flags, ctx):
        self._check_power()
        parent_fd, name = self._fd(parent_inode), os.fsdecode(name)
        fd = os.open(name, os.O_RDWR | os.O_CREAT | (flags & os.O_EXCL), mode & ~ctx.umask, dir_fd=parent_fd)
        attr = self._learn(parent_fd, name)
        ino = attr.st_ino
        if ino in self._files:
            os.close(fd)  # it existed (a race with another create) and is open already
        else:
            self._files[ino] = DataFile(fd)
        self._files[ino].opens += 1
        if flags & os.O_TRUNC:
            self._truncate(ino, 0)
            attr = self._attr(ino)
        return pyfuse3.FileInfo(fh=ino), attr

    @_fuse_op
    async def read(self, fh, off, size):
        file = self._files[fh]
        if file.overlay is not None:
            return file.overlay.read(off, size)  # read-your-writes
        return os.pread(file.fd, size, off)

    @_fuse_op
    async def write(self, fh, off, buf):
        if self.powered_off:
            log.debug("write ino=%d off=%d len=%d discarded: power is off", fh, off, len(buf))
            self.discarded_bytes += len(buf)  # e.g. dirty mmap pages flushed by the unmount
            return len(buf)
        log.debug("write ino=%d off=%d len=%d", fh, off, len(buf))
        self._overlay(fh).write(off, buf)
        return len(buf)

    @_fuse_op
    async def flush(self, fh):
        log.debug("flush ino=%d (close: nothing made durable)", fh)

    @_fuse_op
    async def release(self, fh):
        file = self._files.get(fh)
        if file is not None:
            file.opens -= 1
            self._close_if_unneeded(fh)

    @_fuse_op
    async def fsync(self, fh, datasync):
        if self.powered_off:
            return
        file = self._files[fh]
        if file.overlay is not None:
            written = file.overlay.apply()
            file.overlay = None
            log.debug("fsync ino=%d: %d bytes made durable", fh, written)
        else:
            log.debug("fsync ino=%d: nothing pending", fh)


# ---------------------------------------------------------------------------------------------
# The daemon


async def _unmount(mountpoint: str) -> None:
    """Unmount while still serving: the kernel writes its dirty pages back to us on the way out."""
    res = await trio.run_process(["fusermount3", "-u", mountpoint], check=False, capture_stderr=True)
    if res.returncode == 0:
        return
    log.warning(
        "unmount failed (%s): detaching lazily and closing the FUSE connection",
        res.stderr.decode(errors="replace").strip(),
    )
    await trio.run_process(["fusermount3", "-u", "-z", mountpoint], check=False)
    pyfuse3.terminate()  # closing our /dev/fuse descriptor then aborts the connection


async def _handle_signals(ops: LazyOperations, mountpoint: str) -> None:
    with trio.open_signal_receiver(SIG_POWER_OFF, SIG_STOP, signal.SIGINT, SIG_ARM_CUT) as signals:
        async for signum in signals:
            if signum == SIG_ARM_CUT:
                ops.cut_armed = ops.cut_on_rename_to is not None
                log.info("armed: the power goes after the next rename onto %s", ops.cut_on_rename_to)
                ops._mark("armed")
                continue
            if signum == SIG_POWER_OFF:
                ops.power_off()
            else:
                log.info("stop (%s): unsynced data is dropped", signal.Signals(signum).name)
            await _unmount(mountpoint)
            return


async def _serve(ops: LazyOperations, mountpoint: str) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_handle_signals, ops, mountpoint)
        await pyfuse3.main()  # returns once the file system is unmounted
        nursery.cancel_scope.cancel()


def serve(
    backing: str,
    mountpoint: str,
    cut_on_rename_to: str | None = None,
    cut_marker: str | None = None,
    out_of_order: int | None = None,
):
    """Mount, serve until a signal or an unmount, then drop everything unsynced."""
    # One O_PATH descriptor per inode the kernel knows, one more per open or unsynced file.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        log.warning("open-file limit stays at %d", soft)
    ops = LazyOperations(backing, cut_on_rename_to, cut_marker, out_of_order)
    options = set(pyfuse3.default_options) | {"fsname=lazyfs", "subtype=lazyfs"}
    pyfuse3.init(ops, mountpoint, options)
    log.info("mounted %s on %s (pid %d)", backing, mountpoint, os.getpid())
    try:
        trio.run(_serve, ops, mountpoint)
    finally:
        pyfuse3.close(unmount=True)  # a no-op when unmounted; otherwise leaves no dead mount
        files, nbytes = ops.pending()
        log.info(
            "exit: dropped unsynced data of %d files (~%d bytes); discarded %d bytes written after power off",
            files,
            nbytes,
            ops.discarded_bytes,
        )
        ops.drop_everything()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chaos_tests.lazyfs",
        description=(
            "Mount BACKING on MOUNTPOINT through FUSE, holding file data that was written but not "
            "fsynced in memory, so that a simulated power loss can throw it away. Creating, "
            "renaming, linking and deleting are applied to BACKING at once."
        ),
        epilog=(
            f"Control it with signals: SIGUSR1 ({int(SIG_POWER_OFF)}) loses power (kill the mount's "
            "users first): writes are discarded from then on, the mount is unmounted and the daemon "
            f"exits; BACKING then holds exactly what was fsynced. SIGTERM ({int(SIG_STOP)}) or SIGINT "
            "unmount and exit, also dropping unsynced data. Runs in the foreground; needs /dev/fuse "
            "and fusermount3 (Debian: fuse3)."
        ),
    )
    parser.add_argument("backing", help="directory holding the durable state")
    parser.add_argument("mountpoint", help="empty directory to mount on")
    parser.add_argument("--debug", action="store_true", help="log every write and fsync")
    parser.add_argument(
        "--cut-on-rename-to",
        metavar="NAME",
        help=f"once armed by SIGUSR2 ({int(SIG_ARM_CUT)}), lose power right after a rename onto a file "
        "named NAME (the rename is kept, nothing after it): a crash in the window after it",
    )
    parser.add_argument(
        "--cut-marker", metavar="PATH", help="holds 'armed' once armed, then 'cut: OLD -> NEW' once it cut"
    )
    parser.add_argument(
        "--out-of-order",
        metavar="SEED",
        type=int,
        help="at a power loss, write each unsynced sector (512 bytes) to BACKING or not, a draw each from "
        "SEED, as a disk's cache and write-back leave them: a later sector on disk, an earlier one not",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format="%(asctime)s lazyfs[%(process)d] %(levelname)s %(message)s",
    )
    if not args.debug:
        logging.getLogger("pyfuse3").setLevel(logging.INFO)
    backing, mountpoint = os.path.abspath(args.backing), os.path.abspath(args.mountpoint)
    serve(backing, mountpoint, args.cut_on_rename_to, args.cut_marker, args.out_of_order)
    return 0


# ---------------------------------------------------------------------------------------------
# The controller, for tests and the chaos harness


def _unescape_mount_field(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def is_mounted(path: str) -> bool:
    """Whether path is a mount point, from /proc/self/mounts (asks the mount itself nothing, so a
    dead or busy FUSE daemon cannot make this hang)."""
    with open("/proc/self/mounts") as f:
        return any(_unescape_mount_field(line.split()[1]) == path for line in f)


def force_unmount(path: str) -> None:
    """Detach a (possibly dead) FUSE mount; harmless if nothing is mounted there."""
    if is_mounted(path):
        subprocess.run(["fusermount3", "-u", "-z", path], check=False, capture_output=True)


class LazyFS:
    """A lazyfs daemon mounting ``backing`` on ``mountpoint``; see the module docstring."""

    def __init__(
        self,
        backing: str | os.PathLike,
        mountpoint: str | os.PathLike,
        *,
        log_path=None,
        cut_on_rename_to: str | None = None,
        out_of_order: int | None = None,
    ):
        """``cut_on_rename_to``: see :meth:`arm_cut`. ``out_of_order``: a seed; a power loss
        then keeps some unsynced sectors (``--out-of-order``)."""
        self.backing = os.path.realpath(backing)
        self.out_of_order = out_of_order
        self.cut_on_rename_to = cut_on_rename_to
        self.cut_marker = os.path.join(os.path.dirname(self.backing), os.path.basename(self.backing) + ".cut")
        # realpath of the parent only: resolving the mount point itself would ask the mount.
        mountpoint = os.fspath(mountpoint)
        self.mountpoint = os.path.join(
            os.path.realpath(os.path.dirname(os.path.abspath(mountpoint))), os.path.basename(mountpoint)
        )
        self.log_path = os.fspath(log_path) if log_path else None
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 10.0) -> LazyFS:
        """Spawn the daemon and return once the file system is mounted."""
        if self.proc is not None:
            raise RuntimeError("already started")
        self._clear_mountpoint()
        os.makedirs(self.backing, exist_ok=True)
        os.makedirs(self.mountpoint, exist_ok=True)
        if self.log_path is None:
            fd, self.log_path = tempfile.mkstemp(prefix="lazyfs-", suffix=".log")
            os.close(fd)
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        cut = ["--cut-on-rename-to", self.cut_on_rename_to, "--cut-marker", self.cut_marker]
        if os.path.exists(self.cut_marker):
            os.unlink(self.cut_marker)
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "chaos_tests.lazyfs", self.backing, self.mountpoint]
                + (cut if self.cut_on_rename_to else [])
                + (["--out-of-order", str(self.out_of_order)] if self.out_of_order is not None else []),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
            )
        deadline = time.monotonic() + timeout
        while not is_mounted(self.mountpoint):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._kill()
                raise RuntimeError(f"lazyfs did not mount {self.mountpoint}:\n{self.log_tail()}")
            time.sleep(0.01)
        return self

    def lose_power(self, timeout: float = 10.0) -> None:
        """Simulate a power cut: unsynced data is lost and the daemon exits.

        SIGKILL every process using the mount first; whatever they still do is discarded.
        """
        self._end(SIG_POWER_OFF, timeout)

    def arm_cut(self) -> None:
        """The power goes right after the next rename onto ``cut_on_rename_to``: writes are
        discarded from then on, as after :meth:`lose_power` (kill the users, then call it
        to end the daemon). :attr:`cut_happened` says when it came."""
        if self.cut_on_rename_to is None or self.proc is None:
            raise RuntimeError("no cut_on_rename_to, or not started")
        self.proc.send_signal(SIG_ARM_CUT)
        deadline = time.monotonic() + 5.0
        while not self._marked().startswith(("armed", "cut")):
            if time.monotonic() > deadline:
                raise RuntimeError(f"lazyfs did not arm its power cut:\n{self.log_tail()}")
            time.sleep(0.01)

    @property
    def cut_happened(self) -> bool:
        return self._marked().startswith("cut")

    def cut_where(self) -> str | None:
        """The backing path of the file renamed before the power cut, once it came."""
        marked = self._marked()
        return marked[len("cut: ") :].split(" -> ")[0] if marked.startswith("cut") else None

    def _marked(self) -> str:
        try:
            with open(self.cut_marker) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        """Unmount and end the daemon; unsynced data is dropped (nothing extra is fsynced).
        Idempotent, and cleans up after a daemon that died."""
        self._end(SIG_STOP, timeout)

    def _end(self, signum: int, timeout: float) -> None:
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signum)
            try:
                code = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill()
                raise RuntimeError(f"lazyfs did not exit within {timeout} s:\n{self.log_tail()}") from None
            if code != 0:
                raise RuntimeError(f"lazyfs exited with {code}:\n{self.log_tail()}")
        finally:
            self.proc = None
            force_unmount(self.mountpoint)

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        force_unmount(self.mountpoint)

    def _clear_mountpoint(self) -> None:
        """Remove a dead mount a crashed run left behind; refuse to take over a live one."""
        if not is_mounted(self.mountpoint):
            return
        try:
            os.stat(self.mountpoint)
        except OSError as exc:
            if exc.errno != errno.ENOTCONN:
                raise
            force_unmount(self.mountpoint)
            return
        raise RuntimeError(f"{self.mountpoint} is already mounted")

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> LazyFS:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc_info) -> None:
        self.stop()


if __name__ == "__main__":
    sys.exit(main())
