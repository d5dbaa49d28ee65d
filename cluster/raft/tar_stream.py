"""A tar written as it is sent: members from bytes or from files' committed prefixes.

Snapshot shipping (snapshot_stream.py) and backups (cluster/backup/stream.py) both send a
store as a tar made on the fly, each file read with ``pread`` up to the length its
checkpoint names, never past it: the bytes appended since then are left out. PAX headers,
so names and sizes have no limit.
"""

from __future__ import annotations

import os
import tarfile
import time
from collections.abc import Callable, Iterable, Iterator

BLOCK = tarfile.BLOCKSIZE
END = bytes(2 * BLOCK)  # what ends a tar


def header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, int(time.time())
    return info.tobuf(tarfile.PAX_FORMAT)


def padding(size: int) -> bytes:
    return bytes(-size % BLOCK)


def bytes_member(name: str, data: bytes) -> bytes:
    return header(name, len(data)) + data + padding(len(data))


def file_members(
    files: Iterable[tuple[str, str, int]],
    chunk: int,
    read: Callable[[str, bytes], None] = lambda _n, _d: None,
) -> Iterator[bytes]:
    """The members of ``files`` ((name in the tar, path, committed length) each), in pieces of
    at most ``chunk`` bytes; ``read(name, data)`` sees every piece of a file's bytes.

    Raises OSError if a file is gone before it is opened (retention may remove one), or
    ends before its length. A file already opened is read to its end whatever happens to
    its name.
    """
    for name, path, size in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            yield header(name, size)
            offset = 0
            while offset < size:
                data = os.pread(fd, min(chunk, size - offset), offset)
                if not data:
                    raise OSError(f"{name} ends at {offset}; {size} bytes were committed")
                read(name, data)
                yield data
                offset += len(data)
        finally:
            os.close(fd)
        yield padding(size)


def rechunk(pieces: Iterable[bytes], chunk: int) -> Iterator[bytes]:
    """``pieces`` joined and cut again into chunks of ``chunk`` bytes (the last one shorter)."""
    pending = bytearray()
    for piece in pieces:
        pending += piece
        while len(pending) >= chunk:
            yield bytes(pending[:chunk])
            del pending[:chunk]
    if pending:
        yield bytes(pending)
