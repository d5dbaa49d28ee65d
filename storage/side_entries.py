"""A small per-hour file of fixed-size entries (reschedule links, lateness), read as it grows.

The file is the kind's magic, then entries of a :class:`FixedLayout`. Few messages have
entries, so an hour's are folded into maps in memory when the hour is first asked about,
and only the entries appended since are read after that.
"""

from __future__ import annotations

import numpy as np

from .file_table import FileTable
from .fixed_records import FixedLayout
from .magic import MAGIC_SIZE, check_magic


class SideEntries:
    def __init__(self, files: FileTable, rel: str, layout: FixedLayout, kind: bytes) -> None:
        self.files = files
        self.rel = rel
        self.layout = layout
        self.kind = kind
        self.read = 0  # entries handed out by new_rows()

    def new_rows(self) -> np.ndarray:
        """The entries appended since the last call (all of them the first time), checked."""
        f = self.files.get(self.rel)
        k = 0 if f is None else self.layout.count_in(f.length)
        if k <= self.read:
            return np.empty(0, dtype=self.layout.dtype)
        if self.read == 0:
            check_magic(f.read(0, MAGIC_SIZE), self.kind, f.path)
        rows = self.layout.read(f, self.read, k, self.read)
        self.read = k
        return rows

    def append(self, *fields: int) -> None:
        self.files.writable(self.rel, self.kind).append(self.layout.pack(*fields))

    def path(self) -> str:
        return self.files.path(self.rel)

    def reset(self) -> None:
        """Read from the first entry again (the caller dropped what it folded)."""
        self.read = 0
