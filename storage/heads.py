"""Per-second heads of one hour (file ``<hour>.heads``): a rebuildable cache.

For each of the hour's 3,600 seconds, the globalIndex of its last message (the head
of its reverse-linked chain, -1 when empty) and how many messages it holds. Layout,
little-endian::

    magic     8 bytes   HZHEAD v1
    covered   u32       how many index entries these heads account for
    reserved  u32       zero
    last      3600 x i32
    count     3600 x u32
    crc       u32       crc32 of every byte above

It is written with a temp file and ``os.replace``, without fsync: a heads file that a
crash left stale or empty fails the checks below and costs only a rescan. On load, a file that is
missing, fails its crc, or covers more entries than the index holds is ignored and
the heads are rebuilt by scanning the index; one that covers fewer is caught up by
scanning just the entries past ``covered``.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from .cache_file import read_cache, write_cache
from .delay_index import SECONDS_PER_HOUR
from .magic import HEADS, MAGIC_SIZE, magic

_HEADER = struct.Struct("<II")
HEADS_FILE_SIZE = MAGIC_SIZE + _HEADER.size + SECONDS_PER_HOUR * 8 + 4
assert HEADS_FILE_SIZE == 28_820


class Heads:
    __slots__ = ("last", "count", "covered")

    def __init__(self) -> None:
        self.last = np.full(SECONDS_PER_HOUR, -1, dtype="<i4")
        self.count = np.zeros(SECONDS_PER_HOUR, dtype="<u4")
        self.covered = 0

    def absorb(self, entries: np.ndarray, first_global_index: int) -> None:
        """Account for index entries numbered ``first_global_index ..`` in arrival order."""
        if len(entries) == 0:
            return
        secs = entries["second_of_hour"].astype(np.intp)
        gis = np.arange(first_global_index, first_global_index + len(entries), dtype="<i4")
        self.count += np.bincount(secs, minlength=SECONDS_PER_HOUR).astype("<u4")
        np.maximum.at(self.last, secs, gis)
        self.covered = first_global_index + len(entries)

    def to_bytes(self) -> bytes:
        body = (
            magic(HEADS)
            + _HEADER.pack(self.covered, 0)
            + self.last.astype("<i4").tobytes()
            + self.count.astype("<u4").tobytes()
        )
        return body + zlib.crc32(body).to_bytes(4, "little")

    @classmethod
    def from_bytes(cls, data: bytes) -> Heads | None:
        """Parse a heads file, or None when it is not a sound one (it is only a cache)."""
        if len(data) != HEADS_FILE_SIZE or data[:MAGIC_SIZE] != magic(HEADS):
            return None
        if zlib.crc32(data[:-4]) != int.from_bytes(data[-4:], "little"):
            return None
        h = cls()
        h.covered, _ = _HEADER.unpack_from(data, MAGIC_SIZE)
        at = MAGIC_SIZE + _HEADER.size
        h.last = np.frombuffer(data, dtype="<i4", count=SECONDS_PER_HOUR, offset=at).copy()
        h.count = np.frombuffer(
            data, dtype="<u4", count=SECONDS_PER_HOUR, offset=at + SECONDS_PER_HOUR * 4
        ).copy()
        return h

    def save(self, path: str) -> None:
        write_cache(path, self.to_bytes())

    @classmethod
    def load(cls, path: str) -> Heads | None:
        data = read_cache(path)
        return None if data is None else cls.from_bytes(data)
