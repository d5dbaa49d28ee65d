"""A group's dead-letter queue for operators: peek without a lease, and requeue.

The DLQ of a group is the ready log ``%DLQ%<group>`` (cluster/consumer_groups.py), and
what the group acked there is its progress over that log, as for any topic. A peek reads
the entries past that progress and leases nothing, so consumers of the DLQ are not
disturbed.

A requeue produces each entry's message again to the topic it was first produced to,
due now, under the key ``requeue:<group>:<id>``, but none that a consumer of the DLQ
holds (the group pulls its DLQ: the entry is that consumer's to settle), and no pull
hands its entries out meanwhile; only once that is committed does it ack
the entry for the group, through the consumers' ack path with a receipt the master mints
(the entry is then gone from the peek). A requeue that failed part-way is safe to send
again: the key makes the produce return the message stored the first time (a key holds
while its message is scheduled and for 24 h after its delivery hour), and the ack is
idempotent. A message that comes back to the DLQ is a new message with a new id, so its
next requeue gets a key of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import NamedTuple

import numpy as np

from horologe.cluster.consumer_groups import ID_HEADER, ORIGIN_HEADER, dlq_topic, to_ranges
from horologe.storage import (
    Message,
    MessageColumns,
    MessageId,
    ReadyTrimmedError,
    UnknownMessageError,
    id_strings,
)
from horologe.storage.message import unpack_record
from horologe.storage.ready_log import READY

from ..committed_view import CommittedView
from .receipts import Receipts
from .service import read_all
from .wire import message_fields

SCAN_LIMIT = 262_144  # DLQ entries one call reads past the group's acked position
SCAN_CHUNK = 16_384
MAX_REQUEUE = 1000  # entries one requeue moves
RECEIPT_LEASE_MS = 60_000  # only signed into the receipt the requeue mints for its ack


class Found(NamedTuple):
    """Unacked DLQ entries: their positions and ready rows, and where the scan stopped."""

    positions: list[int]
    rows: np.ndarray
    scanned_to: int
    end: int


class DeadLetters:
    """``produce(columns)`` stores messages through the master's group commit (their ids,
    in order); ``ack(group, topic, receipts)`` is the consumers' ack; ``held(group,
    topic)`` the positions a consumer's lease holds now, and ``hold(group, positions)``
    a block during which no pull hands those ``(topic, position)`` out (the consumers')."""

    def __init__(
        self,
        view: CommittedView,
        produce: Callable[[MessageColumns], Awaitable[list[str]]],
        ack: Callable[[str, str, list[str]], Awaitable[int]],
        receipts: Receipts,
        clock: Callable[[], int],
        held: Callable[[str, str], set[int]],
        hold: Callable[[str, list[tuple[str, int]]], AbstractContextManager],
    ) -> None:
        self.view = view
        self._produce = produce
        self._ack = ack
        self._receipts = receipts
        self._clock = clock
        self._held = held
        self._hold = hold

    def _unacked(self, group: str, after: int, want: int, match=None) -> Found:
        """Up to ``want`` entries past position ``after`` the group has not acked (and that
        ``match(rows) -> mask`` keeps), reading at most SCAN_LIMIT entries."""
        reads = self.view.reads
        topic = dlq_topic(group)
        progress = self.view.group_progress(group, topic)
        start = max(progress.committed, reads.ready_base(topic), after + 1)
        end = reads.ready_count(topic)
        stop = min(end, start + SCAN_LIMIT)
        positions: list[int] = []
        parts: list[np.ndarray] = []
        at = start
        while at < stop and len(positions) < want:
            try:
                rows = reads.read_ready(topic, at, min(stop, at + SCAN_CHUNK))
            except ReadyTrimmedError:
                break  # retention cut it since this view's state: nothing older is held
            if not len(rows):
                break
            offsets = at + np.arange(len(rows), dtype=np.int64)
            keep = ~progress.acked_mask(offsets)
            if match is not None:
                keep &= match(rows)
            hit = np.flatnonzero(keep)[: want - len(positions)]
            positions += offsets[hit].tolist()
            parts.append(rows[hit])
            at = int(offsets[hit[-1]]) + 1 if len(positions) >= want else at + len(rows)
        rows = np.concatenate(parts) if parts else np.empty(0, dtype=READY.dtype)
        return Found(positions, rows, at, end)

    def _records(self, rows: np.ndarray) -> list[bytes | None]:
        """The delay-log record of each row's message (None: removed by retention)."""
        return read_all(self.view.reads, rows["hour"], rows["global_index"])

    def peek(self, group: str, after: int, limit: int) -> dict:
        """Up to ``limit`` unacked entries past ``after``, oldest first, with ``next_after``
        to go on from (None once the end of the log was reached) and how many are unacked."""
        found = self._unacked(group, after, limit)
        messages = []
        ids = id_strings(found.rows["hour"], found.rows["global_index"])
        records = self._records(found.rows)
        for pos, mid, row, record in zip(found.positions, ids, found.rows, records, strict=True):
            deliver_at, dead_at = int(row["deliver_at_ms"]), int(row["delivered_at_ms"])
            if record is None:
                fields = {"id": mid, "expired": True, "deliver_at": deliver_at, "delivered_at": dead_at}
            else:
                fields = message_fields(record, deliver_at, dead_at)
            messages.append({"position": pos, **fields})
        more = len(found.positions) >= limit or found.scanned_to < found.end
        return {
            "group": group,
            "messages": messages,
            "next_after": (found.scanned_to - 1) if more else None,
            "unacked": self.view.unacked_count(group, dlq_topic(group)),
        }

    async def requeue(self, group: str, ids: list[str] | None) -> dict:
        """Requeue the unacked entries holding ``ids`` (every one, if an id is there twice),
        or with ``ids`` None the first MAX_REQUEUE of them."""
        match = None
        if ids is not None:
            parsed = {text: mid for text in ids if (mid := _parsed(text)) is not None}
            names = set(parsed)
            wanted = np.array([_packed(*mid) for mid in parsed.values()], dtype=np.uint64)

            def match(rows: np.ndarray) -> np.ndarray:
                hit = np.isin(_packed(rows["hour"], rows["global_index"]), wanted)
                # A rescheduled message's copy, and a retry of one, answer to the original's
                # id (the peek shows it): their records name it.
                rest = np.flatnonzero(~hit)
                for k, record in zip(rest, self._records(rows[rest]), strict=True):
                    hit[k] = record is not None and unpack_record(record)["headers"].get(ID_HEADER) in names
                return hit

        found = self._unacked(group, -1, MAX_REQUEUE, match)
        records = self._records(found.rows)
        dlq_ids = id_strings(found.rows["hour"], found.rows["global_index"])
        now = self._clock()
        topic = dlq_topic(group)
        held = self._held(group, topic)  # a consumer of the DLQ has them: theirs to settle
        moved, expired, leased, messages, seen, taken = [], [], [], [], set(), []
        for pos, stored_id, record in zip(found.positions, dlq_ids, records, strict=True):
            rec = None if record is None else unpack_record(record)
            # as the peek shows it
            shown = stored_id if rec is None else rec["headers"].get(ID_HEADER, stored_id)
            seen.add(shown)
            if pos in held:
                leased.append(shown)
                continue
            taken.append(pos)
            if rec is None:
                expired.append(stored_id)  # nothing to resend; acked all the same
                continue
            messages.append(_again(rec, group, now))
            moved.append({"id": shown, "position": pos, "topic": messages[-1].topic})
        with self._hold(group, [(topic, pos) for pos in taken]):  # no pull hands them out meanwhile
            new_ids = await self._produce(MessageColumns.from_messages(messages)) if messages else []
            for entry, new_id in zip(moved, new_ids, strict=True):
                entry["new_id"] = new_id
            if taken:
                receipt = self._receipts.issue_ranges(group, topic, to_ranges(taken), now + RECEIPT_LEASE_MS)
                await self._ack(group, topic, [receipt])
        return {
            "requeued": moved,
            "expired": sorted(set(expired)),
            "leased": sorted(set(leased)),
            "missing": [] if ids is None else sorted({i for i in ids if i not in seen}),
            "remaining": self.view.unacked_count(group, topic),
        }


def _parsed(text: str) -> MessageId | None:
    """The id, or None for one that names no message a store could hold (reported missing)."""
    try:
        return MessageId.parse(text)
    except UnknownMessageError:
        return None


def _packed(hour, global_index):
    """An id as one integer (hour and global index side by side), for array lookups."""
    return (np.asarray(hour, dtype=np.uint64) << np.uint64(32)) | np.asarray(global_index, dtype=np.uint64)


def _again(rec: dict, group: str, now: int) -> Message:
    """The message of a DLQ record produced anew: its original topic, due now, attempt 0,
    keyed by the group and the dead message's id. A new message, with an id of its own:
    neither the topic nor the id a retry or a reschedule answered to carries over."""
    headers = {k: v for k, v in rec["headers"].items() if k not in (ORIGIN_HEADER, ID_HEADER)}
    return Message(
        rec["headers"].get(ORIGIN_HEADER, rec["topic"]),
        bytes(rec["body"]),
        now,
        now,
        tuple(rec["tags"]),
        f"requeue:{group}:{rec['id']}",
        headers,
        0,
    )
