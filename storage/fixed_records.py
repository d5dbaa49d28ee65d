"""Files of fixed-size entries, each ending in a crc32 of the bytes before it.

Used by the delay index, the tombstone files and the ready logs. An entry's number
is its position: entry ``n`` sits at ``MAGIC_SIZE + n * layout.size``. Each layout
pairs a :mod:`struct` format (for writing one entry) with a numpy dtype (for scans),
and the two are asserted to agree.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np

from .errors import CorruptLogError
from .magic import MAGIC_SIZE


@dataclass(frozen=True)
class FixedLayout:
    body: struct.Struct  # the entry without its trailing crc
    dtype: np.dtype  # the whole entry, crc last, as numpy sees it

    def __post_init__(self) -> None:
        assert self.body.size + 4 == self.dtype.itemsize, (self.body.size, self.dtype.itemsize)
        assert self.dtype.names[-1] == "crc"

    @property
    def size(self) -> int:
        return self.dtype.itemsize

    def pack(self, *fields: int) -> bytes:
        b = self.body.pack(*fields)
        return b + zlib.crc32(b).to_bytes(4, "little")

    def seal(self, rows: np.ndarray) -> np.ndarray:
        """Fill the crc of every entry of ``rows`` (this layout's dtype, contiguous) in place;
        returns ``rows``. What ``pack`` does for one entry, for many at once."""
        size, body = self.size, self.body.size
        raw = memoryview(rows).cast("B")
        rows["crc"] = [zlib.crc32(raw[at : at + body]) for at in range(0, len(rows) * size, size)]
        return rows

    def offset_of(self, n: int) -> int:
        return MAGIC_SIZE + n * self.size

    def count_in(self, file_length: int) -> int:
        return max(0, file_length - MAGIC_SIZE) // self.size

    def view(self, buf, count: int) -> np.ndarray:
        """The first ``count`` entries of a whole-file buffer, without copying."""
        return np.frombuffer(buf, dtype=self.dtype, count=count, offset=MAGIC_SIZE)

    def verify_entry(self, raw, path: str, at: int) -> None:
        """Check one entry's bytes ``raw``, read from file offset ``at``."""
        if zlib.crc32(raw[:-4]) != int.from_bytes(raw[-4:], "little"):
            n = (at - MAGIC_SIZE) // self.size
            raise CorruptLogError(path, at, f"entry {n} fails its checksum")

    def verify(self, buf, first: int, stop: int, path: str) -> None:
        """Check the crc of entries ``first .. stop-1`` of a whole-file buffer."""
        size = self.size
        mv = memoryview(buf)
        for n in range(first, stop):
            at = MAGIC_SIZE + n * size
            self.verify_entry(mv[at : at + size], path, at)

    def read(self, f, first: int, stop: int, verified: int) -> np.ndarray:
        """Entries ``first .. stop-1`` read from append file ``f``, checking the crc of
        those at or past ``verified`` (and reading back to it when it lies before ``first``)."""
        lo = min(first, verified) if verified < stop else first
        size = self.size
        raw = f.read(self.offset_of(lo), (stop - lo) * size)
        if len(raw) != (stop - lo) * size:
            raise CorruptLogError(f.path, self.offset_of(lo), "file ends inside its committed entries")
        mv = memoryview(raw)
        for n in range(max(lo, verified), stop):
            at = (n - lo) * size
            self.verify_entry(mv[at : at + size], f.path, self.offset_of(n))
        return np.frombuffer(raw, dtype=self.dtype)[first - lo :]
