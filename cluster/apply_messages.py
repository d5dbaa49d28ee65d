"""Filing and cancelling messages inside an applied batch: the steps that the state
machine's entries (``P``, ``C``, ``M``, ``R``) and the schedule entries (``F`` produces a
schedule's firings, a ``K`` pause or delete cancels them by key) share.

Each takes the store and the open batch ``tx``, and writes what it did into the entry's
:class:`~.apply_result.ApplyResult`. Counters in the meta (``stored``, ``delivered``,
``pending/<topic>`` ...) move with :func:`bump`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from itertools import compress

import numpy as np

from horologe.storage import (
    MessageColumns,
    MessageId,
    ReadyEntry,
    Storage,
    Transaction,
    UnknownMessageError,
    ready_rows,
    tags_signature,
)
from horologe.storage.late_policies import DEAD_LETTERED, DLQ_AFTER, DROPPED
from horologe.wheel import Watermark

from .apply_result import ApplyResult
from .committed_reads import CANCELLED, SCHEDULED, message_state, pending_key
from .consumer_groups import dlq_topic
from .entries import Entry
from .retention import readers_of


def bump(store: Storage, tx: Transaction, key: str, n: int) -> None:
    """Add ``n`` to the meta counter ``key``, as the batch has left it."""
    if n:
        tx.set_meta(key, tx.meta.get(key, store.meta(key, 0)) + n)


def within_allowance(
    store: Storage,
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
    dead-letter queue of every group that reads their topic (a retry: its group's), and
    recorded as such.
    ``named(k)``: the k-th one's topic and tag signature, asked only of those past
    their allowance. ``pending``: they were counted pending (not those delivered as
    they arrive)."""
    kinds, limits = store.bucket(hour).late_policies(gis)
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
                readers[topic] = readers_of(store.meta_keys(), topic)
            entry = ReadyEntry(hour, gi, tag_sig, int(deliver_at[k]), clock_ms, 0)
            for group in readers[topic]:
                dead[dlq_topic(group)].append(entry)
        outcome = DEAD_LETTERED if kinds[k] == DLQ_AFTER else DROPPED
        tx.record_late(MessageId(hour, gi), outcome, by)
        bump(store, tx, "late_dead_lettered" if outcome == DEAD_LETTERED else "late_dropped", 1)
        if pending:
            bump(store, tx, pending_key(topic), -1)
    for topic, entries in sorted(dead.items()):
        tx.append_ready(topic, entries)
    return ~over


def _slots(deliver_at_ms: np.ndarray, w: Watermark) -> tuple[np.ndarray, np.ndarray]:
    """Where to file each message, and which of them this apply delivers (``now``):
    those behind the watermark. One not yet due by the master's clock (the watermark
    runs ahead by the master's fire lead, or a new master's clock is behind a tick
    left by one whose clock ran ahead) is delivered too, with its own deliver time:
    no consumer gets it before then (node/consumers/service.py)."""
    now = w.passed_many(deliver_at_ms)
    return np.where(now, w.late_slots(deliver_at_ms), deliver_at_ms), now


def store_messages(
    store: Storage,
    tx: Transaction,
    cols: MessageColumns,
    w: Watermark,
    clock_ms: int,
    res: ApplyResult,
    copies: bool = False,
) -> None:
    """File messages; deliver at once those already due. Rescheduled ``copies`` are the
    same messages, pending already: only those delivered at once leave the count."""
    slots, now = _slots(cols.deliver_at_ms, w)
    res.id_hours, res.id_gis = tx.append_columns(cols, slots, copies)
    fresh = res.stored = tx.fresh
    res.pending_slots = slots[fresh & ~now]
    # Counted in C (Counter over the flagged topics): no Python work per message.
    if copies:
        for topic, n in sorted(Counter(compress(cols.topics, now.tolist())).items()):
            bump(store, tx, pending_key(topic), -n)
    else:
        bump(store, tx, "stored", int(fresh.sum()))
        for topic, n in sorted(Counter(compress(cols.topics, (fresh & ~now).tolist())).items()):
            bump(store, tx, pending_key(topic), n)
    ready = np.flatnonzero(fresh & now)
    if len(ready):
        hours, keep = res.id_hours[ready], np.ones(len(ready), dtype=bool)
        for hour in np.unique(hours).tolist():
            at = ready[hours == hour]

            def named(k: int, at=at) -> tuple[str, int]:
                i = int(at[k])
                return cols.topics[i], tags_signature(cols.tags.get(i, ()))

            keep[hours == hour] = within_allowance(
                store, tx, hour, res.id_gis[at], named, cols.deliver_at_ms[at], clock_ms, pending=False
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
    bump(store, tx, "delivered", len(ready))


def resolve_targets(store: Storage, entry: Entry) -> list[MessageId | None]:
    """The ids an entry's ``ids`` and then ``keys`` name (:func:`targets_of`)."""
    return targets_of(store, entry.ids, entry.keys)


def targets_of(store: Storage, ids: list[str], keys: list[tuple[str, str]]) -> list[MessageId | None]:
    """The ids ``ids`` and then ``keys`` name, as users know them (a rescheduled copy
    answers to its original's id, also when named by its own place: a move must link
    from the original, whose one link leads to where it lives); None for what names none."""
    found: list[MessageId | None] = []
    for text in ids:
        try:
            found.append(MessageId.parse(text))
        except UnknownMessageError:
            found.append(None)
    found += [store.lookup_key(topic, key) for topic, key in keys]
    return store.original_ids(found)


def cancel_messages(store: Storage, tx: Transaction, entry: Entry, w: Watermark, res: ApplyResult) -> None:
    """Tombstone each message the entry names that is still scheduled; ``res.cancels`` says
    what each one was."""
    done = 0
    for mid in resolve_targets(store, entry):
        res.cancel_ids.append(None if mid is None else str(mid))
        place = None if mid is None else store.current_place(mid)
        state = message_state(store, place, w)
        if state == SCHEDULED:
            tx.cancel(place)
            state = CANCELLED
            done += 1
            topic = store.topic_name(int(store.index_entry(place)["topic_id"]))
            bump(store, tx, pending_key(topic), -1)
        res.cancels.append(state)
    bump(store, tx, "cancelled", done)
