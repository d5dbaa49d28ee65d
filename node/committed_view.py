"""The event loop's view of the replicated state: what the tick thread last published.

The writer publishes an :class:`~horologe.cluster.raft.node.Applied` after every
apply; the loop hands it to :meth:`CommittedView.follow` before anything else sees
the apply's result, so a proposal answered here is always visible here. Reads take
no lock and never wait on the writer (cluster/raft/loop_crossing.py).
"""

from __future__ import annotations

from horologe.cluster.committed_reads import (
    MessageStatus,
    counters,
    dlq_by_group,
    group_progress,
    message_status,
    pending_by_topic,
    unacked_by_group,
    unacked_count,
    watermark,
)
from horologe.cluster.consumer_groups import GroupProgress
from horologe.cluster.leases import APPLIED_CLOCK
from horologe.cluster.pending_by_key import pending_by_key
from horologe.cluster.pending_forecast import Forecast, forecast, pending_due
from horologe.cluster.pending_list import PendingPage, list_pending
from horologe.cluster.raft.node import Applied
from horologe.storage import MessageId
from horologe.storage.message import StoredMessage
from horologe.storage.store_reader import StoreReader
from horologe.wheel import Watermark


class CommittedView:
    def __init__(self, reader: StoreReader) -> None:
        self.reads = reader
        self.halted: str | None = None
        self.skipped_entries = 0

    def follow(self, applied: Applied, keep_written: bool = True) -> None:
        """Read at the applied state from now on; ``keep_written``: keep the records of
        messages due soon it wrote, for the pulls (storage/recent_records.py)."""
        self.reads.follow(applied.committed, keep_written)
        self.halted = applied.halted
        self.skipped_entries = applied.skipped

    @property
    def applied_index(self) -> int:
        return self.reads.applied_index

    @property
    def ws(self) -> Watermark:
        return watermark(self.reads)

    @property
    def applied_clock_ms(self) -> int | None:
        """The latest clock of the entries applied (None: none of a known term yet)."""
        return self.reads.meta(APPLIED_CLOCK)

    def counters(self) -> dict[str, int]:
        return counters(self.reads)

    def pending_by_topic(self) -> dict[str, int]:
        return pending_by_topic(self.reads)

    def unacked_by_group(self) -> dict[str, int]:
        return unacked_by_group(self.reads)

    def unacked_count(self, group: str, topic: str) -> int:
        return unacked_count(self.reads, group, topic)

    def dlq_by_group(self) -> dict[str, int]:
        return dlq_by_group(self.reads)

    def forecast(self, start_ms: int, buckets: int, bucket_ms: int, topic: str | None) -> Forecast:
        return forecast(self.reads, start_ms, buckets, bucket_ms, topic)

    def pending_due(self, now_ms: int, horizons_ms: tuple[int, ...]) -> list[int]:
        return pending_due(self.reads, now_ms, horizons_ms)

    def list_pending(
        self, topic: str, start_ms: int, stop_ms: int, limit: int, after: tuple[int, int] | None
    ) -> PendingPage:
        return list_pending(self.reads, topic, start_ms, stop_ms, limit, after)

    def pending_by_key(self, topic: str, found: MessageId | None) -> PendingPage:
        """The pending message the key index's ``found`` names, as a page of 0 or 1."""
        return pending_by_key(self.reads, topic, found)

    def read_messages(self, ids: list[MessageId]) -> list[StoredMessage]:
        return self.reads.read_messages(ids)

    def group_progress(self, group: str, topic: str) -> GroupProgress:
        return group_progress(self.reads, group, topic)

    def status(self, mid: MessageId) -> MessageStatus:
        return message_status(self.reads, mid)

    def close(self) -> None:
        self.reads.close()
