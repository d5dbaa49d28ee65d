"""The tar a node sends for ``GET /admin/backup``: the linked store, then ``backup.json``."""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Iterator

from horologe import __version__
from horologe.storage.commit_journal import JOURNAL_NAME

from ..raft import tar_stream
from ..raft.backup_point import BackupPoint
from .manifest import FORMAT, MANIFEST_NAME, STORE_PREFIX, VERSION, FileSum, Manifest, RaftPoint, encode

CHUNK = 1 << 20


def store_bytes(point: BackupPoint) -> int:
    """What the store's files weigh in the backup (its tar adds headers and padding)."""
    return sum(point.files.values()) + os.path.getsize(os.path.join(point.folder, JOURNAL_NAME))


def backup_chunks(point: BackupPoint, node_id: str, taken_at_ms: int, chunk: int = CHUNK) -> Iterator[bytes]:
    """The backup of ``point`` as a tar, in chunks; the manifest comes last, with the SHA-256
    of every file as it was read here."""
    files = {JOURNAL_NAME: os.path.getsize(os.path.join(point.folder, JOURNAL_NAME)), **point.files}
    members = [
        (STORE_PREFIX + rel, os.path.join(point.folder, rel), size) for rel, size in sorted(files.items())
    ]
    digests = {name: hashlib.sha256() for name, _path, _size in members}

    def manifest() -> Iterator[bytes]:  # once every file is read
        raft = RaftPoint(point.entries[1][1], point.term, [(i, t, c) for c, i, t in point.entries])
        sums = {name: FileSum(size, digests[name].hexdigest()) for name, _path, size in members}
        made = Manifest(
            format=FORMAT,
            version=VERSION,
            node_id=node_id,
            taken_at_ms=taken_at_ms,
            horologe_version=__version__,
            raft=raft,
            store_index=point.store_index,
            files=sums,
        )
        yield tar_stream.bytes_member(MANIFEST_NAME, encode(made))
        yield tar_stream.END

    read = tar_stream.file_members(members, chunk, lambda name, data: digests[name].update(data))
    return tar_stream.rechunk(itertools.chain(read, manifest()), chunk)
