"""Records just written that fall due soon, kept in memory by a reader until a pull takes
them.

A message produced to be delivered at most :data:`SOON_MS` after it was produced (due at
once, a retry, a hot second loaded ahead) is read by a pull within moments. The writer
lists, for each applied batch, the records of such messages it appended
(:class:`WrittenRecords`, in ``CommittedState.written``). A :class:`RecentRecords`, owned
by the reader's thread, keeps them, and a pull's read takes those it keeps from it
(:meth:`RecentRecords.take`) without touching the delay log: no read, no crc. The bytes
are the record as written, the very bytes the log's frame and crc were made of. The
others are read from the log as ever.

Memory stays bounded and falls back by itself:

- at most ``max_bytes`` (a node's ``recent_records_mb``; 0 keeps none), the records kept
  first dropped first when a batch's would pass it (in an hour, the lowest positions);
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
    """Records one batch appended to one hour, positions ascending: the message
    ``gis[k]``'s is ``records[k]``."""

    hour: int
    gis: list[int]
    records: list[bytes]


class RecentRecords:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._by_hour: dict[int, dict[int, bytes]] = {}
        # Per hour: no position below ``_low`` is kept, none from ``_high`` on. A batch
        # appends above what the hour holds, so dropping the oldest walks up from ``_low``.
        self._low: dict[int, int] = {}
        self._high: dict[int, int] = {}
        self.bytes = 0  # of the records kept, each counted with OVERHEAD

    def __len__(self) -> int:
        return sum(map(len, self._by_hour.values()))

    def keep(self, written: tuple[WrittenRecords, ...]) -> None:
        """Keep a batch's records; then, while over ``max_bytes``, drop the oldest."""
        for run in written:
            if not run.gis:
                continue
            if self._by_hour and run.hour > max(self._by_hour):
                self.drop_before(run.hour - 1)
            kept = self._by_hour.setdefault(run.hour, {})
            self._low.setdefault(run.hour, run.gis[0])
            self._high[run.hour] = max(self._high.get(run.hour, 0), run.gis[-1] + 1)
            before = len(kept)
            kept.update(zip(run.gis, run.records, strict=True))
            if len(kept) - before == len(run.gis):
                self.bytes += sum(map(len, run.records)) + OVERHEAD * len(run.records)
            else:  # a position given again (the writer gives each once): counted afresh
                self.bytes = sum(map(_size, self._by_hour.values()))
        while self.bytes > self.max_bytes and self._by_hour:
            self._drop_oldest(min(self._by_hour))

    def take(self, hour: int, gis: list[int]) -> list[bytes | None] | None:
        """The records of messages ``gis`` of ``hour``, in that order, None for each one
        not kept (a message asked for twice is given once); those given are forgotten
        here. None when none of them is kept."""
        kept = self._by_hour.get(hour)
        if kept is None:
            return None
        out = [kept.pop(gi, None) for gi in gis]
        given = [record for record in out if record is not None]
        if not given:
            return None
        self.bytes -= sum(map(len, given)) + OVERHEAD * len(given)
        if not kept:
            self._forget_hour(hour)
        return out

    def drop_before(self, hour: int) -> None:
        """Forget every record of an hour before ``hour``."""
        for h in [h for h in self._by_hour if h < hour]:
            self.bytes -= _size(self._by_hour[h])
            self._forget_hour(h)

    def clear(self) -> None:
        self._by_hour.clear()
        self._low.clear()
        self._high.clear()
        self.bytes = 0

    def _drop_oldest(self, hour: int) -> None:
        """Drop the hour's records from its lowest position up until within ``max_bytes``."""
        kept = self._by_hour[hour]
        gi, high = self._low[hour], self._high[hour]
        while gi < high and self.bytes > self.max_bytes:
            record = kept.pop(gi, None)
            if record is not None:
                self.bytes -= len(record) + OVERHEAD
            gi += 1
        self._low[hour] = gi
        if not kept:
            self._forget_hour(hour)

    def _forget_hour(self, hour: int) -> None:
        del self._by_hour[hour], self._low[hour], self._high[hour]


def _size(kept: dict[int, bytes]) -> int:
    """What records ``kept`` count for: their bytes, each with OVERHEAD."""
    return sum(map(len, kept.values())) + OVERHEAD * len(kept)
