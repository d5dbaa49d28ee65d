"""Heads of the key index's chains (file ``keys/index.heads``): a rebuildable cache.

For each bucket of the key index, the number of its newest entry plus one (0: no entry
yet), and its *marks*; and how many entries the heads account for. Only buckets that
have an entry are written, so the file is as small as the index is young. Layout,
little-endian::

    magic     8 bytes           HZKHDS v1
    buckets   u32               how many buckets the index has (a power of two)
    used      u32               how many buckets follow
    covered   u64               entries numbered below this are accounted for
    bucket    used x u32        the buckets that have an entry, ascending
    head      used x i64        each one's newest entry, plus one
    marks     used x u16        each one's marks
    crc       u32               crc32 of every byte above

Like the hour heads (heads), it is written with a temp file and ``os.replace``, without
fsync, when the store closes or takes a snapshot. On load, a file that is missing, fails
its crc, has another bucket count or length (a file written before the marks: heads
without them), or covers more entries than the index holds is ignored and the heads are
rebuilt by scanning the index from its cleaning cursor; one that covers fewer is caught
up by scanning just the entries past ``covered``. A head may name an entry below the
cursor: the index treats it as no entry (key_index).

**Marks** let a look-up of a new key skip its bucket's chain. An entry marks its bucket
with one of 16 bits, picked by the top four bits of its key hash (the low bits pick the
bucket); a look-up walks the chain only when its own hash's bit is set. The marks may
hold bits of entries gone (below the cleaning cursor, or of a batch rolled back), never
miss an entry's: so a look-up skips only chains that cannot hold its key. Bits of
entries gone would pile up until every mark is full, so a second set (``next_marks``)
is kept of the entries from ``next_from`` on; once the committed cursor has passed
``next_from`` it holds every entry's bit from the cursor on, and takes the place of the
marks (``roll``). At ``λ`` entries a bucket, a look-up walks ``1 - (15/16)^λ`` of
the chains it would have walked without them: 9 % at 1.5 entries a bucket
(6 x 10⁶ entries, the default 2²² buckets).

In memory the heads are one numpy array of ``buckets`` int64 (32 MiB at the default
2**22 buckets) and the marks two of uint16 (8 MiB each), whatever the number of keys;
pages of buckets never used cost nothing.
They live in anonymous mappings of small pages (``sparse_zeros``), not in numpy's own
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


MARK_SHIFT = np.uint64(60)  # a key hash's top four bits pick its mark
MARKS = "<u2"  # a bucket's marks: 16 bits


def sparse_zeros(n: int, dtype: str = "<i8") -> np.ndarray:
    """``n`` zeros of ``dtype`` in small pages, each taking memory only once written."""
    itemsize = np.dtype(dtype).itemsize
    area = mmap.mmap(-1, max(n, 1) * itemsize)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):  # Linux; huge pages may be the default (THP "always")
        area.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(area, dtype=dtype, count=n)


def marks_of(hashes: np.ndarray) -> np.ndarray:
    """The mark bit of each key hash (uint64)."""
    return np.left_shift(np.uint16(1), (hashes >> MARK_SHIFT).astype(np.uint16))


class KeyHeads:
    __slots__ = ("buckets", "heads", "covered", "mask", "marks", "next_marks", "next_from")

    def __init__(self, buckets: int) -> None:
        self.buckets = buckets
        self.mask = buckets - 1
        self.heads = sparse_zeros(buckets)
        self.covered = 0
        self.marks = sparse_zeros(buckets, MARKS)
        self.next_marks = sparse_zeros(buckets, MARKS)
        self.next_from = 0

    def buckets_of(self, hashes: np.ndarray) -> np.ndarray:
        """The bucket of each key hash (uint64): its low bits."""
        return (hashes & np.uint64(self.mask)).astype(np.intp)

    def absorb(self, hashes: np.ndarray, first: int) -> None:
        """Account for entries numbered ``first ..`` whose key hashes are ``hashes``."""
        if len(hashes) == 0:
            return
        buckets = self.buckets_of(hashes)
        np.maximum.at(self.heads, buckets, np.arange(first + 1, first + 1 + len(hashes), dtype="<i8"))
        bits = marks_of(hashes)
        np.bitwise_or.at(self.marks, buckets, bits)
        np.bitwise_or.at(self.next_marks, buckets, bits)
        self.covered = first + len(hashes)

    def may_hold(self, buckets: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """Which of the keys hashed ``hashes`` may have an entry in their bucket's chain."""
        return (self.marks[buckets] & marks_of(hashes)) != 0

    def roll(self, cursor: int, end: int) -> None:
        """The committed cleaning cursor is ``cursor`` and the log ends at ``end``: once the
        cursor has passed ``next_from``, the next marks become the marks."""
        if cursor >= self.next_from:
            self.marks, self.next_marks = self.next_marks, sparse_zeros(self.buckets, MARKS)
            self.next_from = end

    def to_bytes(self) -> bytes:
        used = np.flatnonzero(self.heads).astype("<u4")
        body = b"".join(
            (
                magic(KEY_HEADS),
                _HEADER.pack(self.buckets, len(used), self.covered),
                used.tobytes(),
                self.heads[used].astype("<i8").tobytes(),
                self.marks[used].astype(MARKS).tobytes(),
            )
        )
        return body + zlib.crc32(body).to_bytes(4, "little")

    @classmethod
    def from_bytes(cls, data: bytes, buckets: int) -> KeyHeads | None:
        """Parse a heads file, or None when it is not a sound one for ``buckets`` (a cache).
        The marks read are those of every entry it covers; the next marks start there."""
        start = MAGIC_SIZE + _HEADER.size
        if len(data) < start + 4 or data[:MAGIC_SIZE] != magic(KEY_HEADS):
            return None
        n, used, covered = _HEADER.unpack_from(data, MAGIC_SIZE)
        if n != buckets or len(data) != start + 14 * used + 4:
            return None
        if zlib.crc32(memoryview(data)[:-4]) != int.from_bytes(data[-4:], "little"):
            return None
        which = np.frombuffer(data, dtype="<u4", count=used, offset=start).astype(np.intp)
        if used and int(which.max()) >= buckets:
            return None
        h = cls(buckets)
        h.heads[which] = np.frombuffer(data, dtype="<i8", count=used, offset=start + 4 * used)
        h.marks[which] = np.frombuffer(data, dtype=MARKS, count=used, offset=start + 12 * used)
        h.covered = h.next_from = covered
        return h

    def save(self, path: str) -> None:
        write_cache(path, self.to_bytes())

    @classmethod
    def load(cls, path: str, buckets: int) -> KeyHeads | None:
        data = read_cache(path)
        return None if data is None else cls.from_bytes(data, buckets)
