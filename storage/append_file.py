"""One append-only storage file: a raw fd, its length, optional mmap, rollback.

All writes are ``os.pwrite`` at the known end so a batch can be rolled back with
``ftruncate``; nothing goes through Python's buffered I/O. ENOSPC surfaces as
:class:`StorageFullError` from the write that hit it; a failed fsync ends the process
(storage/durable.py).
"""

from __future__ import annotations

import errno
import mmap
import os

from .durable import fsync
from .errors import StorageFullError


class AppendFile:
    def __init__(self, path: str, length: int) -> None:
        """Open an existing file whose committed length is ``length``."""
        self.path = path
        self.length = length
        self._fd: int | None = None
        self._map: mmap.mmap | None = None
        self.mapped = False  # whether reads should go through mmap (hot hours only)

    @classmethod
    def create(cls, path: str, header: bytes) -> AppendFile:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        f = cls(path, 0)
        f._fd = fd
        f.append(header)
        return f

    @property
    def has_fd(self) -> bool:
        return self._fd is not None

    @property
    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR)
        return self._fd

    def append(self, data: bytes) -> int:
        """Write ``data`` at the end; return the offset it starts at."""
        at = self.length
        try:
            written = os.pwrite(self.fd, data, at)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise StorageFullError(f"{self.path}: disk full writing {len(data)} bytes") from e
            raise
        if written != len(data):  # a short write only happens when the disk fills up
            raise StorageFullError(f"{self.path}: short write ({written} of {len(data)} bytes)")
        self.length = at + len(data)
        return at

    def truncate(self, length: int) -> None:
        self._drop_map()
        os.ftruncate(self.fd, length)
        self.length = length

    def fsync(self) -> None:
        fsync(self.fd, self.path)

    def buffer(self):
        """The file's bytes ``[0, length)``: an mmap when mapped, else a fresh read."""
        if not self.mapped:
            return os.pread(self.fd, self.length, 0)
        if self._map is None or len(self._map) < self.length:
            self._drop_map()
            self._map = mmap.mmap(self.fd, self.length, access=mmap.ACCESS_READ)
        return memoryview(self._map)[: self.length]

    def read(self, offset: int, size: int) -> bytes:
        if self.mapped:
            return bytes(self.buffer()[offset : offset + size])
        return os.pread(self.fd, size, offset)

    def set_mapped(self, mapped: bool) -> None:
        self.mapped = mapped
        if not mapped:
            self._drop_map()

    def _drop_map(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                # A numpy view still points into the map; let the GC close it later.
                pass
            self._map = None

    def close(self) -> None:
        self._drop_map()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
