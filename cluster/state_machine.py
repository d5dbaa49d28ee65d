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
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import compress

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
    tags_signature,
)
from horologe.storage.key_index import CLEAN_ON_TRIM
from horologe.storage.late_policies import DEAD_LETTERED, DLQ_AFTER, DROPPED
from horologe.wheel import SecondCache, Watermark, expand

from .committed_reads import (
    CANCELLED,
    GROUP_PREFIX,
    SCHEDULED,
    group_progress,
    message_state,
    message_states,
    pending_key,
    watermark,
)
from .consumer_groups import ID_HEADER, ORIGIN_HEADER, GroupProgress, dlq_topic, progress_key, retry_topic
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
    EntryKind,
    decode,
)
from .errors import BadEntryError
from .push_apply import apply_subscription
from .retention import passed_by_groups
from .schedule_apply import apply_fires, apply_schedule

log = logging.getLogger(__name__)


@dataclass
class ApplyResult:
    kind: EntryKind | None = None  # None: nothing applied (skipped, halted or an error)
    raft_index: int = 0
    id_hours: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # PRODUCE:
    id_gis: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # each one's id
    pending_slots: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # wheel.on_append
    # CANCEL and MOVE: one state per id / key asked (as it was: SCHEDULED for a message moved
    # now), and the id each one resolved to (the id it answers to, once rescheduled)
    cancels: list[str] = field(default_factory=list)
    cancel_ids: list[str | None] = field(default_factory=list)
    delivered: int = 0
    # How long after its slot the wheel delivered each message (ms, by the entry's clock);
    # not those delivered as they arrived, already due.
    wheel_lateness_ms: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    retained_from_hour: int | None = None  # TRIM: where retention now starts
    dead_lettered: int = 0  # RETRY: entries moved to a DLQ (the copies made are ``ids``)
    schedule: str | None = None  # SCHEDULE: what it did (schedule_apply.ScheduleOutcome)
    subscription: str | None = None  # SUBSCRIBE: what it did (push_apply.PushOutcome)
    error: str | None = None
    skipped: bool = False

    @property
    def ids(self) -> list[MessageId]:
        return list(map(MessageId, self.id_hours.tolist(), self.id_gis.tolist()))


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
            tx.set_meta("applied_term", term)
        w_old = self.ws
        w = max(w_old, entry.ws)
        if w > w_old:
            due = expand(self.store, w_old, w, self.cache)
            res.wheel_lateness_ms = self._deliver(tx, due, entry.clock_ms)
            res.delivered += len(res.wheel_lateness_ms)
            tx.set_meta("ws", w.to_wire())
            tx.seal_before(w.sealed_before_hour())
        if entry.kind == PRODUCE:
            self._store(tx, entry.messages, w, entry.clock_ms, res)
        elif entry.kind == CANCEL:
            self._cancel(tx, entry, w, res)
        elif entry.kind == MOVE:
            self._move(tx, entry, w, res)
        elif entry.kind == ACK:
            self._ack(tx, entry.acks)
        elif entry.kind == RETRY:
            self._retry(tx, entry, w, res)
        elif entry.kind == RELEASE:
            tx.set_meta("released_by", entry.node)
        elif entry.kind == TRIM:
            self._trim(tx, entry, res)
        elif entry.kind == SCHEDULE:
            apply_schedule(self, tx, entry, w, res)
        elif entry.kind == FIRE:
            apply_fires(self, tx, entry, w, res)
        elif entry.kind == SUBSCRIBE:
            res.subscription = apply_subscription(self.store.current_meta, tx, entry, raft_index)
        return res

    def _bump(self, tx: Transaction, key: str, n: int) -> None:
        if n:
            tx.set_meta(key, tx.meta.get(key, self.store.meta(key, 0)) + n)

    def _deliver(self, tx: Transaction, batches: Iterable[np.ndarray], clock_ms: int) -> np.ndarray:
        """Append due rows (wheel DUE dtype) to their topics' ready logs; skip cancelled ones,
        and those past their lateness allowance (:meth:`_within_allowance`). A row's
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

                keep = self._within_allowance(tx, hour, gis, named, slots, clock_ms, pending=True)
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
            self._bump(tx, pending_key(topic), -len(mine))
        self._bump(tx, "delivered", len(ready))
        return ready["delivered_at_ms"].astype(np.int64) - ready["deliver_at_ms"].astype(np.int64)

    def _within_allowance(
        self,
        tx: Transaction,
        hour: int,
        gis: np.ndarray,
        named: Callable[[int], tuple[str, int]],
        deliver_at: np.ndarray,
        clock_ms: int,
        pending: bool,
    ) -> np.ndarray:
        """Which of messages ``hour``/``gis``, falling due now, are within their lateness
        allowance (storage/late_policies.py); the others are dropped, or put in the
        dead-letter queue of every group that reads their topic, and recorded as such.
        ``named(k)``: the k-th one's topic and tag signature, asked only of those past
        their allowance. ``pending``: they were counted pending (not those delivered as
        they arrive)."""
        kinds, limits = self.store.bucket(hour).late_policies(gis)
        late_by = clock_ms - deliver_at
        over = (kinds >= 0) & (late_by > limits)
        if not over.any():
            return ~over
        dead: dict[str, list[ReadyEntry]] = defaultdict(list)
        readers: dict[str, list[str]] = {}  # topic -> its groups, the meta scanned once a topic
        for k in np.flatnonzero(over).tolist():
            (topic, tag_sig), gi, by = named(k), int(gis[k]), int(late_by[k])
            if kinds[k] == DLQ_AFTER:
                if topic not in readers:
                    readers[topic] = self._groups_reading(topic)
                entry = ReadyEntry(hour, gi, tag_sig, int(deliver_at[k]), clock_ms, 0)
                for group in readers[topic]:
                    dead[dlq_topic(group)].append(entry)
            outcome = DEAD_LETTERED if kinds[k] == DLQ_AFTER else DROPPED
            tx.record_late(MessageId(hour, gi), outcome, by)
            self._bump(tx, "late_dead_lettered" if outcome == DEAD_LETTERED else "late_dropped", 1)
            if pending:
                self._bump(tx, pending_key(topic), -1)
        for topic, entries in sorted(dead.items()):
            tx.append_ready(topic, entries)
        return ~over

    def _groups_reading(self, topic: str) -> list[str]:
        """The consumer groups that have pulled from ``topic``: they hold progress in it."""
        keys = (key[len(GROUP_PREFIX) :] for key in self.store.meta_keys() if key.startswith(GROUP_PREFIX))
        return [group for group, _, t in (k.rpartition("/") for k in keys) if t == topic]

    @staticmethod
    def _slots(deliver_at_ms: np.ndarray, w: Watermark) -> tuple[np.ndarray, np.ndarray]:
        """Where to file each message, and which of them this apply delivers (``now``):
        those behind the watermark. One not yet due by the master's clock (the watermark
        runs ahead by the master's fire lead, or a new master's clock is behind a tick
        left by one whose clock ran ahead) is delivered too, with its own deliver time:
        no consumer gets it before then (node/consumers/service.py)."""
        now = w.passed_many(deliver_at_ms)
        return np.where(now, w.late_slots(deliver_at_ms), deliver_at_ms), now

    def _store(
        self,
        tx: Transaction,
        cols: MessageColumns,
        w: Watermark,
        clock_ms: int,
        res: ApplyResult,
        copies: bool = False,
    ) -> None:
        """File messages; deliver at once those already due. Rescheduled ``copies`` are the
        same messages, pending already: only those delivered at once leave the count."""
        slots, now = self._slots(cols.deliver_at_ms, w)
        res.id_hours, res.id_gis = tx.append_columns(cols, slots, copies)
        fresh = tx.fresh
        res.pending_slots = slots[fresh & ~now]
        # Counted in C (Counter over the flagged topics): no Python work per message.
        if copies:
            for topic, n in sorted(Counter(compress(cols.topics, now.tolist())).items()):
                self._bump(tx, pending_key(topic), -n)
        else:
            self._bump(tx, "stored", int(fresh.sum()))
            for topic, n in sorted(Counter(compress(cols.topics, (fresh & ~now).tolist())).items()):
                self._bump(tx, pending_key(topic), n)
        ready = np.flatnonzero(fresh & now)
        if len(ready):
            hours, keep = res.id_hours[ready], np.ones(len(ready), dtype=bool)
            for hour in np.unique(hours).tolist():
                at = ready[hours == hour]

                def named(k: int, at=at) -> tuple[str, int]:
                    i = int(at[k])
                    return cols.topics[i], tags_signature(cols.tags.get(i, ()))

                keep[hours == hour] = self._within_allowance(
                    tx, hour, res.id_gis[at], named, cols.deliver_at_ms[at], clock_ms, pending=False
                )
            ready = ready[keep]
        topics = [cols.topics[i] for i in ready.tolist()]
        for topic in sorted(set(topics)):
            at = ready[[t == topic for t in topics]]
            sigs = [tags_signature(cols.tags.get(i, ())) for i in at.tolist()]
            attempts = [cols.attempts.get(i, 0) for i in at.tolist()]
            due = cols.deliver_at_ms[at]
            at_ms = np.maximum(due, clock_ms)  # not yet due: deliverable at its own time
            rows = ready_rows(res.id_hours[at], res.id_gis[at], sigs, due, at_ms, attempts)
            tx.append_ready(topic, rows)
        res.delivered += len(ready)
        self._bump(tx, "delivered", len(ready))

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
                headers = {**m.headers, ORIGIN_HEADER: m.headers.get(ORIGIN_HEADER, m.topic)}
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
            self._store(tx, MessageColumns.from_messages(copies), w, entry.clock_ms, res)
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

    def _targets(self, entry: Entry) -> list[MessageId | None]:
        """The ids an entry's ``ids`` and then ``keys`` name, as users know them (a
        rescheduled copy answers to its original's id, also when named by its own place:
        a move must link from the original, whose one link leads to where it lives);
        None for what names none."""
        targets: list[MessageId | None] = []
        for text in entry.ids:
            try:
                targets.append(MessageId.parse(text))
            except UnknownMessageError:
                targets.append(None)
        targets += [self.store.lookup_key(topic, key) for topic, key in entry.keys]
        return self.store.original_ids(targets)

    def _cancel(self, tx: Transaction, entry: Entry, w: Watermark, res: ApplyResult) -> None:
        done = 0
        for mid in self._targets(entry):
            res.cancel_ids.append(None if mid is None else str(mid))
            place = None if mid is None else self.store.current_place(mid)
            state = message_state(self.store, place, w)
            if state == SCHEDULED:
                tx.cancel(place)
                state = CANCELLED
                done += 1
                topic = self.store.topic_name(int(self.store.index_entry(place)["topic_id"]))
                self._bump(tx, pending_key(topic), -1)
            res.cancels.append(state)
        self._bump(tx, "cancelled", done)

    def _move(self, tx: Transaction, entry: Entry, w: Watermark, res: ApplyResult) -> None:
        """Reschedules: the place each message lives is tombstoned, a copy filed at the new
        time under the same id (storage/moves.py). A message asked twice moves once, to
        the last time asked. The places are read, tombstoned and linked together, each
        hour's at once."""
        targets = self._targets(entry)
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
            self._store(tx, MessageColumns.from_messages(copies), w, entry.clock_ms, res, copies=True)
            new_places = list(map(MessageId, res.id_hours.tolist(), res.id_gis.tolist()))
            tx.link_moves([targets[k] for k in moving], new_places)
        self._bump(tx, "rescheduled", len(copies))
