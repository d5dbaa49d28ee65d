"""When pending messages will fire: counts per time bucket, from the hour indexes.

A message is pending while it is stored, not cancelled and not yet passed by the
delivery watermark. Counts are to the second of a message's slot (its deliver_at, or
where a late arrival was filed). No body is read:

* an hour that lies inside one bucket, for all topics, costs its index's length less
  its tombstones (two file sizes and the tombstone file);
* an hour split over buckets reads its per-second heads (28.8 KB);
* one topic, or the hour the watermark is in, reads the hour's index columns.

The node serves it as ``GET /v1/forecast`` and as the ``horologe_pending_due`` gauges.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from horologe.storage.delay_index import MS_PER_HOUR, SECONDS_PER_HOUR
from horologe.storage.store_reads import StoreReads

from .committed_reads import watermark

MS_PER_S = 1000


@dataclass(frozen=True)
class Forecast:
    start_ms: int  # of the first bucket
    bucket_ms: int
    counts: np.ndarray  # pending per bucket, int64
    before: int  # pending due before the first bucket (overdue, or asked from later)

    def as_wire(self) -> list[dict]:
        starts = self.start_ms + self.bucket_ms * np.arange(len(self.counts), dtype=np.int64)
        return [{"start": s, "count": c} for s, c in zip(starts.tolist(), self.counts.tolist(), strict=True)]


def forecast(
    reads: StoreReads, start_ms: int, buckets: int, bucket_ms: int, topic: str | None = None
) -> Forecast:
    """Pending messages per bucket ``[start_ms + k * bucket_ms, ... + bucket_ms)`` for
    ``k < buckets``; ``bucket_ms`` a whole number of seconds. An unknown topic has none."""
    assert bucket_ms > 0 and bucket_ms % MS_PER_S == 0 and buckets > 0, (bucket_ms, buckets)
    counts = np.zeros(buckets, dtype=np.int64)
    stop_ms = start_ms + buckets * bucket_ms
    topic_id = None if topic is None else reads.topic_id(topic)
    if topic is not None and topic_id is None:
        return Forecast(start_ms, bucket_ms, counts, 0)
    w = watermark(reads)
    before = 0
    for hour in reads.hours():
        first_ms = hour * MS_PER_HOUR
        if hour < w.hour or first_ms >= stop_ms:
            continue
        last_ms = first_ms + MS_PER_HOUR - MS_PER_S  # the hour's last second
        lo, hi = _bucket_of(first_ms, start_ms, bucket_ms), _bucket_of(last_ms, start_ms, bucket_ms)
        if lo == hi and topic_id is None and hour != w.hour:  # whole hour in one place
            n = reads.hour_live_count(hour)
            if lo < 0:
                before += n
            elif lo < buckets:
                counts[lo] += n
            continue
        after = (w.ms, w.local_index) if hour == w.hour else None
        per_second = reads.hour_census(hour, topic_id, after)
        at = (first_ms + MS_PER_S * np.arange(SECONDS_PER_HOUR, dtype=np.int64) - start_ms) // bucket_ms
        before += int(per_second[at < 0].sum())
        inside = (at >= 0) & (at < buckets)
        counts += np.bincount(at[inside], weights=per_second[inside], minlength=buckets).astype(np.int64)
    return Forecast(start_ms, bucket_ms, counts, before)


def pending_due(reads: StoreReads, now_ms: int, horizons_ms: tuple[int, ...]) -> list[int]:
    """For each horizon, the pending messages due before ``now_ms + horizon``, overdue
    ones included: what a master whose wheel keeps up will deliver within it. To the
    second: a message counts when its second begins before the horizon."""
    now_s = now_ms - now_ms % MS_PER_S
    seconds = [-(-(now_ms + h - now_s) // MS_PER_S) for h in horizons_ms]  # begin before now + h
    f = forecast(reads, now_s, max(seconds), MS_PER_S)
    running = np.cumsum(f.counts)
    return [f.before + int(running[k - 1]) for k in seconds]


def _bucket_of(ms: int, start_ms: int, bucket_ms: int) -> int:
    return (ms - start_ms) // bucket_ms
