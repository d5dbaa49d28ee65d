"""What the replicated state says, read from a store at a committed state.

The state machine uses these functions on its writer store while applying; a node's
event loop uses them on its :class:`~horologe.storage.store_reader.StoreReader`
(node/committed_view.py) without ever taking a lock. They only read.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from horologe.storage import MessageExpiredError, MessageId, UnknownMessageError, late_policies
from horologe.storage.delay_index import slot_ms
from horologe.storage.store_reads import StoreReads
from horologe.wheel import Watermark

from .consumer_groups import DLQ_PREFIX, GroupProgress, progress_key


class MessageState(StrEnum):
    """What ``GET /v1/messages/{id}`` and cancels report (the wire keeps the strings)."""

    SCHEDULED = "scheduled"
    DELIVERED = "delivered"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"
    DROPPED = "dropped"  # fell due later than its max_lateness, with on_late drop
    DEAD_LETTERED = "dead_lettered"  # ... with on_late dlq


SCHEDULED, DELIVERED, CANCELLED, UNKNOWN, DROPPED, DEAD_LETTERED = MessageState
LATE_STATES = {late_policies.DROPPED: DROPPED, late_policies.DEAD_LETTERED: DEAD_LETTERED}
DELIVERED_AT_SLACK_MS = 600_000  # far beyond how far one master's clock may trail another's
STATUS_SCAN_ROWS = 4_000_000  # a status looks no further for a ready entry (160 MB of log)
STATUS_SCAN_CHUNK = 65_536
COUNTERS = ("stored", "delivered", "cancelled", "rescheduled", "late_dropped", "late_dead_lettered")
GONE = ("delivered", "cancelled", "late_dropped", "late_dead_lettered")  # stored, then no longer pending
PENDING_PREFIX = "pending/"  # meta pending/<topic>: stored - delivered - cancelled of that topic
GROUP_PREFIX = "group/"  # meta group/<group>/<topic>: a group's progress (consumer_groups.py)


@dataclass(frozen=True)
class MessageStatus:
    id: MessageId
    topic: str
    state: MessageState
    deliver_at_ms: int
    delivered_at_ms: int | None
    late_by_ms: int | None = None  # how late it was delivered, dropped or dead-lettered


def watermark(reads: StoreReads) -> Watermark:
    """The committed delivery watermark."""
    wire = reads.meta("ws")
    return Watermark(0) if wire is None else Watermark.from_wire(wire)


def counters(reads: StoreReads) -> dict[str, int]:
    return {k: reads.meta(k, 0) for k in COUNTERS}


def pending_key(topic: str) -> str:
    return f"{PENDING_PREFIX}{topic}"


def pending_by_topic(reads: StoreReads) -> dict[str, int]:
    """Messages scheduled and not yet delivered or cancelled, per topic, in topic id order.

    Counted since the counters were added: a store that held pending messages before
    counts them as delivered for nothing, so a topic's figure is floored at 0."""
    topics = sorted(reads.topics().items(), key=lambda kv: kv[1])
    return {t: max(0, n) for t, _ in topics if (n := reads.meta(pending_key(t))) is not None}


def unacked_by_group(reads: StoreReads) -> dict[str, int]:
    """Per consumer group (by name), ready entries past its progress that it has not acked,
    over every ready log it has pulled from; from the small meta, no log is read."""
    out: dict[str, int] = {}
    for key in reads.meta_keys():
        if key.startswith(GROUP_PREFIX):
            group, _, topic = key[len(GROUP_PREFIX) :].rpartition("/")
            out[group] = out.get(group, 0) + unacked_count(reads, group, topic)
    return out


def unacked_count(reads: StoreReads, group: str, topic: str) -> int:
    """Entries of ready log ``topic`` the group has not acked (all it holds, for a group
    that never acked there); from the meta, no log is read."""
    p = group_progress(reads, group, topic)
    start, end = max(p.committed, reads.ready_base(topic)), reads.ready_count(topic)
    acked = sum(min(hi, end) - max(lo, start) for lo, hi in p.acked if hi > start and lo < end)
    return max(0, end - start - acked)


def dlq_by_group(reads: StoreReads) -> dict[str, int]:
    """Entries each group's dead-letter log ``%DLQ%<group>`` still holds (retention trims it)."""
    return {
        t[len(DLQ_PREFIX) :]: reads.ready_count(t) - reads.ready_base(t)
        for t in sorted(reads.topics())
        if t.startswith(DLQ_PREFIX)
    }


def group_progress(reads: StoreReads, group: str, topic: str) -> GroupProgress:
    return GroupProgress.from_wire(reads.meta(progress_key(group, topic)))


def message_state(reads: StoreReads, mid: MessageId | None, w: Watermark) -> MessageState:
    """State of ``mid`` with the delivery watermark at ``w``."""
    if mid is None:
        return UNKNOWN
    try:
        e = reads.index_entry(mid)
    except MessageExpiredError:
        return DELIVERED
    except UnknownMessageError:
        return UNKNOWN
    if reads.is_cancelled(mid):
        return CANCELLED
    outcome = reads.late_outcome(mid)
    if outcome is not None:
        return LATE_STATES[outcome[0]]
    slot = int(slot_ms(mid.hour, e))
    return DELIVERED if (slot, int(e["local_index"])) <= tuple(w) else SCHEDULED


def message_status(reads: StoreReads, mid: MessageId) -> MessageStatus:
    """State of one message: O(1) from its id (the copy it lives as now, once rescheduled);
    delivered_at from its ready entry."""
    place = reads.current_place(mid)
    stored = reads.read_message(place)
    state = message_state(reads, place, watermark(reads))
    at = late_by = None
    m = stored.message
    if state == DELIVERED:
        at = delivered_at(reads, m.topic, place, m.deliver_at_ms)
        late_by = None if at is None else max(0, at - m.deliver_at_ms)
    elif state in (DROPPED, DEAD_LETTERED):
        late_by = reads.late_outcome(place)[1]
    return MessageStatus(mid, m.topic, state, m.deliver_at_ms, at, late_by)


def delivered_at(reads: StoreReads, topic: str, mid: MessageId, deliver_at_ms: int) -> int | None:
    """Find the message's ready entry without reading the whole log.

    A message is never delivered before its deliver_at by the delivering master's
    clock, and delivered_at runs forward in the log except where one master's clock
    is behind the last one's: by far less than ``DELIVERED_AT_SLACK_MS``. So no entry
    before the first with delivered_at >= deliver_at - slack (found by bisection)
    can be this message's; it is searched from there, at most ``STATUS_SCAN_ROWS``.
    """
    n = reads.ready_count(topic)
    target = deliver_at_ms - DELIVERED_AT_SLACK_MS
    lo, hi = reads.ready_base(topic), n  # retention removed what lies below the base
    while lo < hi:
        mid_row = (lo + hi) // 2
        if int(reads.read_ready(topic, mid_row, mid_row + 1)["delivered_at_ms"][0]) < target:
            lo = mid_row + 1
        else:
            hi = mid_row
    stop = min(n, lo + STATUS_SCAN_ROWS)
    for start in range(lo, stop, STATUS_SCAN_CHUNK):
        rows = reads.read_ready(topic, start, min(stop, start + STATUS_SCAN_CHUNK))
        hit = np.flatnonzero((rows["hour"] == mid.hour) & (rows["global_index"] == mid.global_index))
        if len(hit):
            return int(rows["delivered_at_ms"][hit[0]])
    return None
