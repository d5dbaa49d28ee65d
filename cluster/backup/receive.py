"""Unpacking a backup's tar (stream.py) into a folder, each file checked as it lands."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import tarfile
from collections.abc import Callable, Iterable, Iterator

from horologe.storage.durable import fsync, fsync_dir
from horologe.storage.errors import FsyncFailedError

from .manifest import MANIFEST_NAME, BackupError, Manifest, decode, is_store_path
from .staging import staged

PART_SUFFIX = ".part"
LOCK_SUFFIX = ".lock"


class _ChunkReader:
    """A file-like ``read`` over an iterator of chunks (for tarfile's stream mode)."""

    def __init__(self, chunks: Iterator[bytes], on_bytes: Callable[[int], None]) -> None:
        self._chunks = chunks
        self._on_bytes = on_bytes
        self._buf = bytearray()

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._buf) < n:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._on_bytes(len(chunk))
            self._buf += chunk
        n = len(self._buf) if n < 0 else min(n, len(self._buf))
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out


def receive(
    chunks: Iterable[bytes], dest: str, on_bytes: Callable[[int], None] = lambda _n: None
) -> Manifest:
    """Unpack the backup tar in ``chunks`` into the new folder ``dest``.

    It is written to ``<dest>.part`` and renamed to ``dest`` once every file matches the
    manifest's size and SHA-256 and all of it is on disk: ``dest`` exists only whole. On a
    failure (a full disk too), ``<dest>.part`` is removed and BackupError says what went
    wrong. A ``<dest>.part`` left by an attempt that stopped midway is replaced; anything
    else by that name is refused, and left as it is. A receive holds ``<dest>.lock`` (an
    ``flock``) while it writes: another into the same ``dest`` meanwhile (two runs of a
    cron job that overlap) is refused, rather than taking the first's ``.part`` for one
    left over.
    """
    dest = os.path.normpath(dest)  # "DIR/" names DIR: its ".part" is a sibling, not inside it
    with _receiving(dest):
        if os.path.lexists(dest):
            raise BackupError(f"{dest} exists: name a new folder for the backup")
        part = dest + PART_SUFFIX
        if os.path.lexists(part) and not _unfinished(part):
            raise BackupError(
                f"{part} exists and is not a backup's unfinished folder: move it away, or name another folder"
            )
        shutil.rmtree(part, ignore_errors=True)
        with staged(part, f"writing {part}"):
            os.makedirs(part)
            manifest = _unpack(_ChunkReader(iter(chunks), on_bytes), part)
            os.rename(part, dest)
            try:
                fsync_dir(os.path.dirname(os.path.abspath(dest)))
            except FsyncFailedError:  # the rename may not be on disk: nothing is kept
                shutil.rmtree(dest, ignore_errors=True)
                raise
    return manifest


@contextlib.contextmanager
def _receiving(dest: str) -> Iterator[None]:
    """Hold ``<dest>.lock`` while the block runs (BackupError if another receive holds it);
    removed after. One taken on a lock file another receive removed meanwhile is taken again
    on the path's new file."""
    lock, parent = dest + LOCK_SUFFIX, os.path.dirname(os.path.abspath(dest))
    try:
        os.makedirs(parent, exist_ok=True)  # as the .part's were made
    except FileExistsError:
        raise BackupError(f"cannot write into {parent}: Not a directory") from None
    except OSError as e:
        raise BackupError(f"cannot make {parent}: {e.strerror}") from e
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise BackupError(f"cannot make {lock}: {e.strerror}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise BackupError(f"another backup is being written into {dest} ({lock} is held)") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        os.unlink(lock)
        os.close(fd)


def _unfinished(part: str) -> bool:
    """Whether ``part`` is a folder that holds nothing but what :func:`receive` writes."""
    if not os.path.isdir(part) or os.path.islink(part):
        return False
    return set(os.listdir(part)) <= {"store", MANIFEST_NAME}


def _unpack(reader: _ChunkReader, part: str) -> Manifest:
    sums: dict[str, tuple[int, str]] = {}
    manifest: Manifest | None = None
    try:
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            for member in tar:
                if manifest is not None:
                    raise BackupError(f"the backup goes on after its manifest ({member.name})")
                if member.name == MANIFEST_NAME:
                    data = tar.extractfile(member).read()
                    manifest = decode(data, "the backup's manifest")
                    _write(os.path.join(part, MANIFEST_NAME), [data])
                    continue
                if not member.isfile() or not is_store_path(member.name):
                    raise BackupError(f"the backup holds {member.name!r}, which is not a store file")
                if member.name in sums:
                    raise BackupError(f"the backup holds {member.name} twice")
                digest = hashlib.sha256()
                pieces = _pieces(tar.extractfile(member))
                size = _write(os.path.join(part, member.name), pieces, digest.update)
                sums[member.name] = (size, digest.hexdigest())
    except tarfile.TarError as e:
        raise BackupError(f"the backup stream is not a whole tar: {e}") from e
    if manifest is None:
        raise BackupError("the backup stream ended before its manifest: the node stopped sending midway")
    for name, want in sorted(manifest.files.items()):
        got = sums.pop(name, None)
        if got is None:
            raise BackupError(f"the backup's manifest names {name}, which the stream did not hold")
        if got != (want.bytes, want.sha256):
            raise BackupError(f"{name} arrived with {got[0]:,} bytes that do not match the node's SHA-256")
    if sums:
        raise BackupError(f"the stream held files its manifest does not name: {', '.join(sorted(sums)[:5])}")
    for root, _dirs, _files in os.walk(part):
        fsync_dir(root)
    return manifest


def _pieces(src) -> Iterator[bytes]:
    while data := src.read(1 << 20):
        yield data


def _write(path: str, pieces: Iterable[bytes], seen: Callable[[bytes], None] = lambda _d: None) -> int:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    size = 0
    with open(path, "wb") as f:
        for data in pieces:
            seen(data)
            f.write(data)
            size += len(data)
        f.flush()
        fsync(f.fileno(), path)
    return size
