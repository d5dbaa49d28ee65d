"""The tar a node sends for ``GET /admin/backup``: the linked store, then ``backup.json``."""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Iterator

from horologe import __version__
from horologe.storage.commit_journal import JOURNAL_NAME, checkpoint_file

from ..raft import tar_stream
from ..raft.backup_point import BackupPoint
from .manifest import FORMAT, MANIFEST_NAME, STORE_PREFIX, VERSION, FileSum, Manifest, RaftPoint, encode

CHUNK = 1 << 20


def store_bytes(point: BackupPoint) -> int:
    """What the store's files weigh in the backup (its tar adds headers and padding)."""
    return len(checkpoint_file(point.checkpoint)) + sum(point.checkpoint["files"].values())


def backup_chunks(point: BackupPoint, node_id: str, taken_at_ms: int, chunk: int = CHUNK) -> Iterator[bytes]:
    """The backup of ``point`` as a tar, in chunks: ``store/commits.log`` holding the
    checkpoint, every file up to its committed length, then the manifest, with the SHA-256
    of every file as it was read here."""
    journal_name, journal = STORE_PREFIX + JOURNAL_NAME, checkpoint_file(point.checkpoint)
    files = sorted(point.checkpoint["files"].items())
    members = [(STORE_PREFIX + r, os.path.join(point.folder, r), size) for r, size in files]
    digests = {name: hashlib.sha256() for name, _path, _size in members}
    sums = {journal_name: FileSum(len(journal), hashlib.sha256(journal).hexdigest())}

    def manifest() -> Iterator[bytes]:  # once every file is read
        sums.update({name: FileSum(size, digests[name].hexdigest()) for name, _path, size in members})
        made = Manifest(
            format=FORMAT,
            version=VERSION,
            node_id=node_id,
            taken_at_ms=taken_at_ms,
            horologe_version=__version__,
            raft=RaftPoint(point.entries[1][1], point.term, [(i, t, c) for c, i, t in point.entries]),
            store_index=point.store_index,
            files=sums,
        )
        yield tar_stream.bytes_member(MANIFEST_NAME, encode(made))
        yield tar_stream.END

    read = tar_stream.file_members(members, chunk, lambda name, data: digests[name].update(data))
    head = (tar_stream.bytes_member(journal_name, journal),)
    return tar_stream.rechunk(itertools.chain(head, read, manifest()), chunk)
