"""Append-only logs of fixed-size entries cut into segment files (ready logs, the key index).

A segmented log numbers its entries 0, 1, 2, ... for ever. Each segment file holds a run
of them and is named ``<dir>/<stem>.<first>.<ext>``, ``first`` being the number (in
decimal) of its first entry. A segment is the magic of its kind, then entries
(fixed_records), so entry ``n`` sits in the segment with the greatest ``first <= n``, at
position ``n - first``. A segment is closed once it holds ``segment_entries`` entries (or
when its owner says so); the next append opens a new one.

Space is given back a whole segment at a time, from the front. Numbers never shift, so
the offsets readers hold stay valid, and removing a segment is an unlink, which a
hard-linked snapshot survives (its own link keeps the bytes). ``base``, the first number
still held, is kept by the log's owner in the journal's meta, so a log whose segments
were all removed still knows where it ends.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Mapping

import numpy as np

from .errors import CorruptLogError
from .file_table import FileTable
from .fixed_records import FixedLayout
from .magic import MAGIC_SIZE, check_magic

Segment = tuple[int, str]  # (number of its first entry, relative path)


def segment_rel(directory: str, stem: str, first: int, ext: str) -> str:
    return f"{directory}/{stem}.{first}.{ext}"


def parse_segment(rel: str, ext: str) -> tuple[str, int] | None:
    """``(stem, first)`` of a segment path ending in ``.<ext>``, else None."""
    _, _, name = rel.rpartition("/")
    parts = name.split(".")
    if len(parts) != 3 or parts[2] != ext or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1])


def list_segments(files: Mapping[str, int], directory: str, ext: str) -> dict[str, list[Segment]]:
    """Every segmented log under ``directory``: stem -> its segments, ascending."""
    out: dict[str, list[Segment]] = {}
    prefix = directory + "/"
    for rel in files:
        if rel.startswith(prefix):
            parsed = parse_segment(rel, ext)
            if parsed is not None:
                out.setdefault(parsed[0], []).append((parsed[1], rel))
    for segs in out.values():
        segs.sort()
    return out


class SegmentedLog:
    """One segmented log over a :class:`FileTable`: its segments and where it ends.

    ``segments`` is the list the owner keeps (committed ones, plus any a batch opened).
    """

    def __init__(
        self,
        files: FileTable,
        layout: FixedLayout,
        kind: bytes,
        segments: list[Segment],
        base: int,
        name_of: Callable[[int], str],
    ) -> None:
        self.files = files
        self.layout = layout
        self.kind = kind
        self.segments = segments
        self.base = base
        self.name_of = name_of

    def entries_in(self, rel: str) -> int:
        f = self.files.get(rel)
        return 0 if f is None else self.layout.count_in(f.length)

    @property
    def end(self) -> int:
        """The number the next entry gets."""
        if not self.segments:
            return self.base
        first, rel = self.segments[-1]
        return first + self.entries_in(rel)

    def segment_ranges(self) -> list[tuple[int, int, str]]:
        """``(first, end, rel)`` of every segment, ascending."""
        return [(first, first + self.entries_in(rel), rel) for first, rel in self.segments]

    def overlapping(self, start: int, stop: int) -> Iterator[tuple[int, str]]:
        """The segments holding entries ``start .. stop-1``."""
        firsts = [first for first, _ in self.segments]
        k = max(0, bisect.bisect_right(firsts, start) - 1)
        for first, rel in self.segments[k:]:
            if first >= stop:
                return
            yield first, rel

    def check_magic(self, rel: str) -> None:
        f = self.files.get(rel)
        check_magic(f.read(0, MAGIC_SIZE), self.kind, f.path)

    def append(self, blob: bytes, segment_entries: int, new_segment: bool = False) -> list[str]:
        """Append whole packed entries, opening segments as they fill (and first a new one
        when ``new_segment`` and the last holds entries); returns the segments opened."""
        size = self.layout.size
        assert len(blob) % size == 0
        opened = []
        at = 0
        while at < len(blob):
            room = 0
            if self.segments and not (new_segment and at == 0 and self.entries_in(self.segments[-1][1])):
                room = segment_entries - self.entries_in(self.segments[-1][1])
            if room <= 0:
                first = self.end
                rel = self.name_of(first)
                self.files.writable(rel, self.kind)
                self.segments.append((first, rel))
                opened.append(rel)
                room = segment_entries
            take = min(room * size, len(blob) - at)
            self.files.writable(self.segments[-1][1], self.kind).append(blob[at : at + take])
            at += take
        return opened

    def read(
        self,
        start: int,
        stop: int,
        verified_from: Callable[[str, int, int], int] | None = None,
        mark: Callable[[str, int, int], None] | None = None,
    ) -> np.ndarray:
        """Entries ``start .. stop-1`` (all held), with their checksums verified from where
        ``verified_from(rel, lo, hi)`` says that segment's positions ``lo .. hi-1`` stop
        having been verified before; ``mark(rel, lo, hi)`` hears of each range verified."""
        parts = []
        for first, rel in self.overlapping(start, stop):
            f = self.files.get(rel)
            n = self.layout.count_in(f.length)
            lo, hi = max(start, first) - first, min(stop, first + n) - first
            if lo >= hi:
                continue
            checked = lo if verified_from is None else verified_from(rel, lo, hi)
            parts.append(self.layout.read(f, lo, hi, checked))
            if checked < hi and mark is not None:
                mark(rel, lo, hi)
        if not parts:
            rows = np.empty(0, dtype=self.layout.dtype)
        else:
            rows = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if len(rows) != stop - start:
            path = self.files.path(self.segments[0][1] if self.segments else "")
            raise CorruptLogError(path, 0, f"segments do not hold entries {start}..{stop - 1}")
        return rows
