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
from .row_crcs import row_crcs


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
        rows["crc"] = self._crcs(memoryview(rows).cast("B"), len(rows))
        return rows

    def _crcs(self, buf: memoryview, count: int) -> np.ndarray:
        """The crc32 of each of the first ``count`` entries of ``buf`` (their bytes before the crc)."""
        return row_crcs(buf, count, self.size, self.body.size)

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
        self.verify_run(
            buf, MAGIC_SIZE + first * self.size, stop - first, path, MAGIC_SIZE + first * self.size
        )

    def verify_run(self, buf, at: int, count: int, path: str, file_at: int) -> None:
        """Check the crc of ``count`` entries that start at ``at`` in ``buf``, read from
        file offset ``file_at``: the crcs computed in one pass, compared all at once."""
        if count <= 0:
            return
        size = self.size
        mv = memoryview(buf)[at : at + count * size]
        want = np.frombuffer(mv, dtype=self.dtype, count=count)["crc"]
        bad = np.flatnonzero(self._crcs(mv, count) != want)
        if len(bad):
            n = (file_at - MAGIC_SIZE) // size + int(bad[0])
            raise CorruptLogError(path, MAGIC_SIZE + n * size, f"entry {n} fails its checksum")

    def read(self, f, first: int, stop: int, verified: int) -> np.ndarray:
        """Entries ``first .. stop-1`` read from append file ``f``, checking the crc of
        those at or past ``verified`` (and reading back to it when it lies before ``first``)."""
        lo = min(first, verified) if verified < stop else first
        size = self.size
        raw = f.read(self.offset_of(lo), (stop - lo) * size)
        if len(raw) != (stop - lo) * size:
            raise CorruptLogError(f.path, self.offset_of(lo), "file ends inside its committed entries")
        checked = max(lo, verified)
        self.verify_run(raw, (checked - lo) * size, stop - checked, f.path, self.offset_of(checked))
        return np.frombuffer(raw, dtype=self.dtype)[first - lo :]
