"""Heads of the key index's chains (file ``keys/index.heads``): a rebuildable cache.

For each bucket of the key index, the number of its newest entry plus one (0: no entry
yet), and how many entries the heads account for. Only buckets that have an entry are
written, so the file is as small as the index is young. Layout, little-endian::

    magic     8 bytes           HZKHDS v1
    buckets   u32               how many buckets the index has (a power of two)
    used      u32               how many buckets follow
    covered   u64               entries numbered below this are accounted for
    bucket    used x u32        the buckets that have an entry, ascending
    head      used x i64        each one's newest entry, plus one
    crc       u32               crc32 of every byte above

Like the hour heads (heads), it is written with a temp file and ``os.replace``, without
fsync, when the store closes or takes a snapshot. On load, a file that is missing, fails
its crc, has another bucket count, or covers more entries than the index holds is
ignored and the heads are rebuilt by scanning the index from its cleaning cursor; one
that covers fewer is caught up by scanning just the entries past ``covered``. A head
may name an entry below the cursor: the index treats it as no entry (key_index).

In memory the heads are one numpy array of ``buckets`` int64 (32 MiB at the default
2**22 buckets) whatever the number of keys; pages of buckets never used cost nothing.
It lives in an anonymous mapping of small pages (``sparse_zeros``), not in numpy's own
memory: numpy asks the kernel for huge pages for any array over 4 MiB, and a huge page
is zeroed whole, 2 MiB at once, on its first write. Each of a young index's first ~50
keys then landed on a new one: 4.5-5.9 ms of the tick thread each on this machine (a
single produce's p99 in a cluster's first second), and all 32 MiB resident after them.
"""

from __future__ import annotations

import mmap
import struct
import zlib

import numpy as np

from .cache_file import read_cache, write_cache
from .magic import KEY_HEADS, MAGIC_SIZE, magic

_HEADER = struct.Struct("<IIQ")
assert _HEADER.size == 16

HEADS_NAME = "keys/index.heads"


def sparse_zeros(n: int) -> np.ndarray:
    """``n`` int64 zeros in small pages, each taking memory only once written."""
    area = mmap.mmap(-1, max(n, 1) * 8)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):  # Linux; huge pages may be the default (THP "always")
        area.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(area, dtype="<i8", count=n)


class KeyHeads:
    __slots__ = ("buckets", "heads", "covered", "mask")

    def __init__(self, buckets: int) -> None:
        self.buckets = buckets
        self.mask = buckets - 1
        self.heads = sparse_zeros(buckets)
        self.covered = 0

    def absorb(self, hashes: np.ndarray, first: int) -> None:
        """Account for entries numbered ``first ..`` whose key hashes are ``hashes``."""
        if len(hashes) == 0:
            return
        buckets = (hashes & np.uint64(self.mask)).astype(np.intp)
        np.maximum.at(self.heads, buckets, np.arange(first + 1, first + 1 + len(hashes), dtype="<i8"))
        self.covered = first + len(hashes)

    def to_bytes(self) -> bytes:
        used = np.flatnonzero(self.heads).astype("<u4")
        body = b"".join(
            (
                magic(KEY_HEADS),
                _HEADER.pack(self.buckets, len(used), self.covered),
                used.tobytes(),
                self.heads[used].astype("<i8").tobytes(),
            )
        )
        return body + zlib.crc32(body).to_bytes(4, "little")

    @classmethod
    def from_bytes(cls, data: bytes, buckets: int) -> KeyHeads | None:
        """Parse a heads file, or None when it is not a sound one for ``buckets`` (a cache)."""
        start = MAGIC_SIZE + _HEADER.size
        if len(data) < start + 4 or data[:MAGIC_SIZE] != magic(KEY_HEADS):
            return None
        n, used, covered = _HEADER.unpack_from(data, MAGIC_SIZE)
        if n != buckets or len(data) != start + 12 * used + 4:
            return None
        if zlib.crc32(memoryview(data)[:-4]) != int.from_bytes(data[-4:], "little"):
            return None
        which = np.frombuffer(data, dtype="<u4", count=used, offset=start).astype(np.intp)
        if used and int(which.max()) >= buckets:
            return None
        h = cls(buckets)
        h.heads[which] = np.frombuffer(data, dtype="<i8", count=used, offset=start + 4 * used)
        h.covered = covered
        return h

    def save(self, path: str) -> None:
        write_cache(path, self.to_bytes())

    @classmethod
    def load(cls, path: str, buckets: int) -> KeyHeads | None:
        data = read_cache(path)
        return None if data is None else cls.from_bytes(data, buckets)
