"""Pending messages of a topic in the order they will fire, a page at a time.

The order is the delivery watermark's: by ``(slot_ms, local_index)``, the key every
stored message has (wheel/watermark.py), which is unique and never changes. A page
ends at a key, and the next page starts past it, so messages stored meanwhile appear
in their place, and a page never repeats or skips a message that stays pending. Only
the index is read to choose a page; the caller reads the page's records. A call reads
the indexes of whole hours until its page is full, or until it has read ``SCAN_BUDGET``
entries: then the page may be short (even empty), and its cursor goes on after the
last hour read, so a sparse topic among many messages never holds the reader long.
"""

from __future__ import annotations

from dataclasses import dataclass

from horologe.storage import MessageId
from horologe.storage.delay_index import MS_PER_HOUR
from horologe.storage.store_reads import StoreReads

from .committed_reads import watermark

SCAN_BUDGET = 1 << 21  # index entries (40 bytes each) one call reads at most, past its first hour
LAST_OF_MS = 0xFFFF_FFFF  # a local index past every real one: a key after all of its ms


@dataclass(frozen=True)
class PendingPage:
    ids: list[MessageId]
    slots_ms: list[int]  # when each fires (its deliver_at, unless it arrived late)
    next_after: tuple[int, int] | None  # the last key of a full page: where the next starts


def list_pending(
    reads: StoreReads,
    topic: str,
    start_ms: int,
    stop_ms: int,
    limit: int,
    after: tuple[int, int] | None = None,
) -> PendingPage:
    """Up to ``limit`` pending messages of ``topic`` with slots in ``[start_ms, stop_ms)``
    and keys past ``after`` (a previous page's ``next_after``)."""
    tid = reads.topic_id(topic)
    if tid is None:
        return PendingPage([], [], None)
    w = watermark(reads)
    floor = max((w.ms, w.local_index), (start_ms, -1), after or (0, -1))
    ids: list[MessageId] = []
    slots: list[int] = []
    lis: list[int] = []
    scanned = 0
    for hour in reads.hours():
        if ((hour + 1) * MS_PER_HOUR - 1, LAST_OF_MS) <= floor:  # its last key is not past the floor
            continue
        if hour * MS_PER_HOUR >= stop_ms:
            break
        if scanned >= SCAN_BUDGET:  # a short page: the next goes on after the last hour read
            return PendingPage(ids, slots, (hour * MS_PER_HOUR - 1, LAST_OF_MS))
        scanned += reads.hour_entries(hour)
        gis, hour_slots, hour_lis = reads.hour_live_keys(hour, tid, floor, stop_ms)
        take = limit + 1 - len(ids)  # one more than asked: is there a next page?
        ids += [MessageId(hour, gi) for gi in gis[:take].tolist()]
        slots += hour_slots[:take].tolist()
        lis += hour_lis[:take].tolist()
        if len(ids) > limit:
            return PendingPage(ids[:limit], slots[:limit], (slots[limit - 1], lis[limit - 1]))
    return PendingPage(ids, slots, None)
