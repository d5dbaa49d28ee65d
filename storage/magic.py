"""The 8-byte magic that opens every storage file: 6 bytes of kind, then u16 version.

A file whose first bytes are not the magic of its kind is refused with
:class:`CorruptLogError` at offset 0 rather than read as something else.
"""

from __future__ import annotations

from .errors import CorruptLogError

MAGIC_SIZE = 8
VERSION = 1

DELAY_LOG = b"HZDLOG"
DELAY_INDEX = b"HZDIDX"
TOMBSTONES = b"HZTOMB"
MOVES = b"HZMOVE"
LATENESS = b"HZLATE"
HEADS = b"HZHEAD"
READY_LOG = b"HZREDY"
KEY_INDEX = b"HZKIDX"
KEY_HEADS = b"HZKHDS"
COMMIT_JOURNAL = b"HZJRNL"
RAFT_DUMP = b"HZSNAP"  # cluster/raft/dump_file.py: the local dump's manifest
RAFT_SHIPPED = b"HZSHIP"  # cluster/raft/dump_file.py: a dump as shipped to a follower
RAFT_LOG = b"HZRAFT"  # the cluster's Raft journal (cluster/raft/journal.py)


def magic(kind: bytes) -> bytes:
    assert len(kind) == 6
    return kind + VERSION.to_bytes(2, "little")


def check_magic(head: bytes, kind: bytes, path: str) -> None:
    if head[:MAGIC_SIZE] != magic(kind):
        raise CorruptLogError(path, 0, f"not a {kind.decode()} v{VERSION} file")
