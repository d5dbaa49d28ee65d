"""Records just written that fall due soon, kept in memory by a reader until a pull takes
them.

A message produced to be delivered at most :data:`SOON_MS` after it was produced (due at
once, a retry, a hot second loaded ahead) is read by a pull within moments. The writer
lists, for each applied batch, the records of such messages it appended
(:class:`WrittenRecords`, in ``CommittedState.written``). A :class:`RecentRecords`, owned
by the reader's thread, keeps them, and a read of messages of one hour that it holds all
of takes them from it (:meth:`RecentRecords.take`) without touching the delay log: no
read, no crc. The bytes are the record as written, the very bytes the log's frame and crc
were made of. What it does not hold in full is read from the log as ever.

Memory stays bounded and falls back by itself:

- at most ``max_bytes`` (a node's ``recent_records_mb``; 0 keeps none). When full, a new
  batch is not kept: the records kept first are the ones pulled first;
- a record taken is forgotten (a message handed out again, after a nack or a lease that
  ended, is read from the log);
- records of hours before the previous one are forgotten as a later hour's come in
  (a message nobody pulled, or cancelled), and so are those of hours retention removed.
"""

from __future__ import annotations

from dataclasses import dataclass

SOON_MS = 60_000  # a message due this soon after its production is kept
OVERHEAD = 100  # bytes a kept record costs beyond its own: the bytes object, the dict slot


@dataclass(frozen=True)
class WrittenRecords:
    """Records one batch appended to one hour: the message ``gis[k]``'s is ``records[k]``."""

    hour: int
    gis: list[int]
    records: list[bytes]


class RecentRecords:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._by_hour: dict[int, dict[int, bytes]] = {}
        self.bytes = 0  # of the records kept, each counted with OVERHEAD

    def __len__(self) -> int:
        return sum(map(len, self._by_hour.values()))

    def keep(self, written: tuple[WrittenRecords, ...]) -> None:
        """Keep a batch's records, unless that would pass ``max_bytes``."""
        for run in written:
            if self._by_hour and run.hour > max(self._by_hour):
                self.drop_before(run.hour - 1)
            size = sum(map(len, run.records)) + OVERHEAD * len(run.records)
            if self.bytes + size <= self.max_bytes:
                self._by_hour.setdefault(run.hour, {}).update(zip(run.gis, run.records, strict=True))
                self.bytes += size

    def take(self, hour: int, gis: list[int]) -> list[bytes] | None:
        """The records of messages ``gis`` of ``hour``, in that order, forgotten here; None
        (and nothing forgotten) unless all of them are kept."""
        kept = self._by_hour.get(hour)
        if kept is None:
            return None
        try:
            out = [kept[gi] for gi in gis]
        except KeyError:
            return None
        for gi in gis:
            record = kept.pop(gi, None)  # a message asked for twice is kept once
            if record is not None:
                self.bytes -= len(record) + OVERHEAD
        if not kept:
            del self._by_hour[hour]
        return out

    def drop_before(self, hour: int) -> None:
        """Forget every record of an hour before ``hour``."""
        for h in [h for h in self._by_hour if h < hour]:
            kept = self._by_hour.pop(h)
            self.bytes -= sum(map(len, kept.values())) + OVERHEAD * len(kept)

    def clear(self) -> None:
        self._by_hour.clear()
        self.bytes = 0
