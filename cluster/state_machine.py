"""The replicated state machine: what applying one log entry does, on every node alike.

Pure apart from storage I/O: no Raft, no threads, no clock (time comes in the entry).
Applying an entry first advances the delivery watermark to the entry's ``ws``,
appending what that passes (``wheel.expand``) to the ready logs, then does the
entry's own work. It never raises: a bad entry is recorded and skipped identically
on every node; a local I/O failure (disk full) halts this node instead, since going
on without the entry would make it diverge from its peers.
"""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from collections.abc import Iterable

import numpy as np

from horologe.storage import (
    SKIPPED,
    CorruptLogError,
    Message,
    MessageColumns,
    MessageId,
    ReadyEntry,
    ReadyTrimmedError,
    Storage,
    StorageError,
    StorageFullError,
    Transaction,
    UnknownMessageError,
    ready_rows,
)
from horologe.storage.key_index import CLEAN_ON_TRIM
from horologe.wheel import SecondCache, Watermark, expand

from .apply_messages import bump, cancel_messages, resolve_targets, store_messages, within_allowance
from .apply_result import ApplyResult
from .committed_reads import (
    SCHEDULED,
    group_progress,
    message_states,
    pending_key,
    watermark,
)
from .consumer_groups import ID_HEADER, GroupProgress, dlq_topic, progress_key, retry_headers, retry_topic
from .entries import (
    ACK,
    CANCEL,
    FIRE,
    MOVE,
    PRODUCE,
    RELEASE,
    RETRY,
    SCHEDULE,
    SUBSCRIBE,
    TRIM,
    Entry,
    decode,
)
from .errors import BadEntryError
from .leases import APPLIED_CLOCK, LEASE_PREFIX, SILENCE_MS, LeaseTable, lease_key
from .push_apply import apply_subscription
from .retention import passed_by_groups
from .schedule_apply import apply_fires, apply_schedule

log = logging.getLogger(__name__)


class StateMachine:
    def __init__(self, store: Storage) -> None:
        self.store = store
        self.cache = SecondCache(store)
        self.errors: deque[tuple[int, str]] = deque(maxlen=100)  # skipped entries, for status
        self.halted: str | None = None  # set when this node must stop applying
        self._mapped_hour: int | None = None

    @property
    def ws(self) -> Watermark:
        """The committed watermark, as this writer sees it."""
        return watermark(self.store)

    # -- apply ----------------------------------------------------------------

    def apply(self, raft_index: int, blob: bytes, term: int | None = None) -> ApplyResult:
        """Apply the entry at ``raft_index`` (of Raft term ``term``, when known).

        What is wrong with the entry itself is the same on every node: it is recorded and
        skipped. What is wrong with this replica halts it (it stops applying and reports
        why), since skipping here alone would make it diverge: a full disk or an I/O error,
        a damaged file (CorruptLogError), a store that holds another term's entry at this
        index (written before a power loss this log no longer remembers), or any error not
        foreseen here.
        """
        if self.halted:
            return ApplyResult(raft_index=raft_index, error=self.halted)
        if term is not None and raft_index == self.store.applied_index:
            held = self.store.meta("applied_term")
            if held is not None and held != term:
                why = f"the store holds entry {raft_index} of term {held}, the log one of term {term}"
                return self._halt(raft_index, why)
        try:
            # Decoded inside: an entry the store applied already (replayed after a restart)
            # is skipped by Storage.apply without being decoded.
            res = self.store.apply(raft_index, lambda tx: self._apply(tx, decode(blob), raft_index, term))
        except (StorageFullError, OSError, CorruptLogError) as e:
            return self._halt(raft_index, f"{type(e).__name__}: {e}")
        except (BadEntryError, StorageError, ValueError) as e:
            self.errors.append((raft_index, str(e)))
            log.error("entry %d skipped: %s", raft_index, e)
            return ApplyResult(raft_index=raft_index, error=str(e))
        except Exception as e:  # noqa: BLE001 - unforeseen: stop here rather than guess
            log.exception("unexpected error applying entry %d", raft_index)
            return self._halt(raft_index, f"unexpected {type(e).__name__}: {e}")
        if res is SKIPPED:
            return ApplyResult(raft_index=raft_index, skipped=True)
        self._map_hot_hours()
        return res

    def _map_hot_hours(self) -> None:
        """Read the watermark's hour and the next through mmap, as the wheel does on its side:
        every delivering apply reads the current hour's index."""
        hour = self.ws.hour
        if hour != self._mapped_hour:
            self._mapped_hour = hour
            self.store.map_hours([hour, hour + 1])

    def halt(self, why: str) -> None:
        """Stop applying for good (until a restart): this replica cannot be trusted to."""
        self.halted = why
        log.critical("halting: this replica stops applying: %s", why)

    def _halt(self, raft_index: int, why: str) -> ApplyResult:
        self.halt(f"entry {raft_index}: {why}")
        return ApplyResult(raft_index=raft_index, error=self.halted)

    def _apply(self, tx: Transaction, entry: Entry, raft_index: int, term: int | None) -> ApplyResult:
        res = ApplyResult(kind=entry.kind, raft_index=raft_index)
        if term is not None:
            last_term, last_clock = tx.current_meta("applied_term"), tx.current_meta(APPLIED_CLOCK)
            if last_clock is not None and entry.clock_ms > last_clock:
                gap = entry.clock_ms - last_clock
                if gap > SILENCE_MS or (last_term is not None and term > last_term):
                    self._pause_leases(tx, last_clock, entry.clock_ms)
                    res.leases_paused = (last_clock, gap)
            tx.set_meta("applied_term", term)
            # The latest entry clock: quorum time may fall back a little within a term.
            tx.set_meta(APPLIED_CLOCK, max(entry.clock_ms, last_clock or 0))
        w_old = self.ws
        w = max(w_old, entry.ws)
        if w > w_old:
            due = expand(self.store, w_old, w, self.cache)
            res.wheel_lateness_ms = self._deliver(tx, due, entry.clock_ms)
            res.delivered += len(res.wheel_lateness_ms)
            tx.set_meta("ws", w.to_wire())
            tx.seal_before(w.sealed_before_hour())
        if entry.kind == PRODUCE:
            store_messages(self.store, tx, entry.messages, w, entry.clock_ms, res)
        elif entry.kind == CANCEL:
            cancel_messages(self.store, tx, entry, w, res)
        elif entry.kind == MOVE:
            self._move(tx, entry, w, res)
        elif entry.kind == ACK:
            self._lease(tx, entry.leases)
            self._ack(tx, entry.acks)
        elif entry.kind == RETRY:
            self._retry(tx, entry, w, res)
        elif entry.kind == RELEASE:
            tx.set_meta("released_by", entry.node)
        elif entry.kind == TRIM:
            self._trim(tx, entry, res)
        elif entry.kind == SCHEDULE:
            apply_schedule(self.store, tx, entry, w, res)
        elif entry.kind == FIRE:
            apply_fires(self.store, tx, entry, w, res)
        elif entry.kind == SUBSCRIBE:
            res.subscription = apply_subscription(self.store.current_meta, tx, entry, raft_index)
        return res

    def _deliver(self, tx: Transaction, batches: Iterable[np.ndarray], clock_ms: int) -> np.ndarray:
        """Append due rows (wheel DUE dtype) to their topics' ready logs; skip cancelled ones,
        and those past their lateness allowance (``apply_messages.within_allowance``). A row's
        ``delivered_at`` is ``clock_ms``, or its slot if the master fired it ahead of that
        (node/wheel_driver.py, fire lead). Returns how late (ms after its slot) each
        delivered message is."""
        tids, rows = [], []  # per hour of each batch, in delivery order
        for due in batches:
            for hour in np.unique(due["hour"]).tolist():
                part = due[due["hour"] == hour]
                bucket = self.store.bucket(hour)
                gis = part["global_index"].astype(np.int64)
                live = ~bucket.cancelled_mask()[gis]
                gis, slots = gis[live], part["slot_ms"][live].astype(np.int64)
                entries = bucket.index_view()[gis]

                def named(k: int, entries=entries) -> tuple[str, int]:
                    return self.store.topic_name(int(entries["topic_id"][k])), int(entries["tag_sig"][k])

                keep = within_allowance(self.store, tx, hour, gis, named, slots, clock_ms, pending=True)
                tids.append(entries["topic_id"][keep])
                # Fired ahead of its slot (the master's fire lead): deliverable at the slot.
                at = np.maximum(slots[keep], clock_ms)
                rows.append(ready_rows(hour, gis[keep], entries["tag_sig"][keep], slots[keep], at))
        if not rows:
            return np.zeros(0, dtype=np.int64)
        tid, ready = np.concatenate(tids), np.concatenate(rows)
        for t in np.unique(tid).tolist():  # topics in id order, as before
            mine = ready[tid == t]
            topic = self.store.topic_name(t)
            tx.append_ready(topic, mine)
            bump(self.store, tx, pending_key(topic), -len(mine))
        bump(self.store, tx, "delivered", len(ready))
        return ready["delivered_at_ms"].astype(np.int64) - ready["deliver_at_ms"].astype(np.int64)

    def group_progress(self, group: str, topic: str, tx: Transaction) -> GroupProgress:
        """A group's progress as the open batch ``tx`` has left it so far."""
        key = progress_key(group, topic)
        if key in tx.meta:
            return GroupProgress.from_wire(tx.meta[key])
        return group_progress(self.store, group, topic)

    def _ack(self, tx: Transaction, acks: Iterable[tuple[str, str, int, int]]) -> None:
        by_group: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
        for group, topic, lo, hi in acks:
            by_group[(group, topic)].append((lo, hi))
        for (group, topic), ranges in sorted(by_group.items()):
            progress = self.group_progress(group, topic, tx)
            # Below the ready log's base nothing is left to ack: its committed offset moves
            # there, or it would wait for acks that can no longer come.
            progress = progress.skip_to(self.store.ready_base(topic)).ack(ranges)
            tx.set_meta(progress_key(group, topic), progress.to_wire())
            key = lease_key(group, topic)
            held = tx.current_meta(key)
            if held is not None:  # an acked (or nacked) message's lease ends
                table = LeaseTable(held)
                for lo, hi in ranges:
                    table.cut(lo, hi)
                self._write_leases(tx, key, table, topic)

    def _lease(self, tx: Transaction, items: list[tuple]) -> None:
        """Leases taken, extended or given back, in order (cluster/leases.py)."""
        tables: dict[tuple[str, str], LeaseTable] = {}
        for group, topic, lo, hi, until, token, pull in items:
            if (group, topic) not in tables:
                tables[(group, topic)] = LeaseTable(tx.current_meta(lease_key(group, topic)))
            tables[(group, topic)].put(lo, hi, until, token, pull)
        for (group, topic), table in sorted(tables.items()):
            self._write_leases(tx, lease_key(group, topic), table, topic)

    def _write_leases(self, tx: Transaction, key: str, table: LeaseTable, topic: str | None) -> None:
        """A lease table's new value, without what the ready log ``topic`` no longer holds."""
        if topic is not None:
            table.trim(self.store.ready_base(topic))
        tx.set_meta(key, table.to_wire())

    def _pause_leases(self, tx: Transaction, last_clock_ms: int, clock_ms: int) -> None:
        """A new term's first entry, or one after a silence: leases running at the last
        entry's clock get the gap between the two entries back (cluster/leases.py)."""
        for key in tx.meta_keys():
            if key.startswith(LEASE_PREFIX):
                table = LeaseTable(tx.current_meta(key))
                table.pause(last_clock_ms, clock_ms - last_clock_ms)
                self._write_leases(tx, key, table, None)

    def _retry(self, tx: Transaction, entry: Entry, w: Watermark, res: ApplyResult) -> None:
        """Nacks: a copy for the group's retry topic at the given time, or the DLQ."""
        copies: list[Message] = []
        dead: dict[str, list[ReadyEntry]] = defaultdict(list)
        done: set[tuple[str, str, int]] = set()
        for group, topic, offset, deliver_at in entry.retries:
            if (group, topic, offset) in done or self.group_progress(group, topic, tx).is_acked(offset):
                continue  # nacked twice, or acked already: one copy at most
            try:
                rows = self.store.read_ready(topic, offset, offset + 1)
            except ReadyTrimmedError:
                continue  # removed by retention: nothing to retry
            if len(rows) == 0:
                continue  # names no delivered message: nothing to retry
            row = rows[0]
            mid = MessageId(int(row["hour"]), int(row["global_index"]))
            done.add((group, topic, offset))
            try:
                m = self.store.read_message(mid).message
            except UnknownMessageError:
                continue  # removed by retention: acknowledge, there is nothing to resend
            if deliver_at < 0:
                dead[dlq_topic(group)].append(
                    ReadyEntry(
                        mid.hour,
                        mid.global_index,
                        int(row["tag_sig"]),
                        int(row["deliver_at_ms"]),
                        entry.clock_ms,
                        m.attempt,
                    )
                )
            else:
                headers = retry_headers(m.headers, m.topic, str(mid))
                copies.append(
                    Message(
                        retry_topic(group),
                        m.body,
                        deliver_at,
                        entry.clock_ms,
                        m.tags,
                        None,
                        headers,
                        m.attempt + 1,
                    )
                )
        if copies:
            store_messages(self.store, tx, MessageColumns.from_messages(copies), w, entry.clock_ms, res)
        for topic, entries in sorted(dead.items()):
            tx.append_ready(topic, entries)
            res.dead_lettered += len(entries)
        self._ack(tx, [(group, topic, offset, offset + 1) for group, topic, offset in sorted(done)])

    def _trim(self, tx: Transaction, entry: Entry, res: ApplyResult) -> None:
        """Retention, as the master proposed it, clamped to what the committed state allows:
        a ready segment once every group of its topic passed it, an hour once no held
        ready entry names it (cluster/retention.py)."""
        for topic, offset in sorted(set(entry.ready)):
            if self.store.topic_id(topic) is None:
                continue
            passed = passed_by_groups(
                self.store.meta_keys(),
                lambda g, t=topic: self.group_progress(g, t, tx),
                topic,
                self.store.ready_base(topic),
            )
            tx.trim_ready(topic, offset if passed is None else min(offset, passed))
        res.retained_from_hour = tx.drop_hours_before(entry.hour)
        tx.clean_keys(CLEAN_ON_TRIM)

    def _move(self, tx: Transaction, entry: Entry, w: Watermark, res: ApplyResult) -> None:
        """Reschedules: the place each message lives is tombstoned, a copy filed at the new
        time under the same id (storage/moves.py). A message asked twice moves once, to
        the last time asked. The places are read, tombstoned and linked together, each
        hour's at once."""
        targets = resolve_targets(self.store, entry)
        places = self.store.current_places(targets)
        last = {place: k for k, place in enumerate(places) if place is not None}
        res.cancels = message_states(self.store, places, w)
        res.cancel_ids = [None if mid is None else str(mid) for mid in targets]
        moving = [k for k, state in enumerate(res.cancels) if state == SCHEDULED and last[places[k]] == k]
        moved = [places[k] for k in moving]
        tx.cancel_many(moved)
        copies = []
        for k, stored in zip(moving, self.store.read_messages(moved), strict=True):
            m = stored.message
            headers = {**m.headers, ID_HEADER: res.cancel_ids[k]}
            at = entry.deliver_at[k]
            copies.append(Message(m.topic, m.body, at, entry.clock_ms, m.tags, m.key, headers, m.attempt))
        if copies:
            cols = MessageColumns.from_messages(copies)
            store_messages(self.store, tx, cols, w, entry.clock_ms, res, copies=True)
            new_places = list(map(MessageId, res.id_hours.tolist(), res.id_gis.tolist()))
            tx.link_moves([targets[k] for k in moving], new_places)
        bump(self.store, tx, "rescheduled", len(copies))
