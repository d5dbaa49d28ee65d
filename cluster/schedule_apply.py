"""Applying the schedule entries, on every node alike: ``K`` (create, pause, resume,
delete a recurring schedule) and ``F`` (produce its firings). State layout in
cluster/schedule_state.py; what is planned when, in cluster/schedule_plan.py.

Every answer is decided here, at apply, from the committed state (``ApplyResult.schedule``):
two creates of one name race to the log, and the second is told ``exists``.

* **create** stores the definition and a mark at the entry's clock (or just before
  ``start_at``, when later): nothing before it fires. The same definition again (a
  create retried) is ``unchanged``; another one under a taken name is ``exists``.
* **pause** stops planning and cancels, by key, the firings already produced and not yet
  delivered (those planned within the horizon).
* **resume** plans again from the later of the entry's clock and the mark: the fire
  times that passed while paused are skipped, and so are the ones the pause cancelled
  (their keys stay taken for 24 h after their hour, so they could not be produced again).
* **delete** cancels the same way and drops the definition; its mark stays, as the floor
  of a schedule created again under that name (for the same reason), until the clock
  passes it; a schedule deleted before its ``start_at`` produced nothing and leaves none.
* **F** produces each schedule's firings only if its definition is the incarnation that
  was planned, is not paused, and its mark is where the planning started; then moves the
  mark. Firings are ordinary messages keyed ``schedule:<name>:<fire ms>``, so a firing
  produced twice is stored once.
"""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum

from horologe.storage import Message, MessageColumns, Storage, Transaction
from horologe.wheel import Watermark

from .apply_messages import cancel_messages, store_messages, targets_of
from .apply_result import ApplyResult
from .committed_reads import SCHEDULED, message_state
from .entries import CANCEL, Entry
from .errors import BadEntryError
from .schedule_state import (
    MARK_PREFIX,
    MAX_SCHEDULES,
    NAMES_KEY,
    PLANNED_KEPT_MS,
    PLANNED_MOVED_KEPT,
    SCHEDULE_HEADER,
    ScheduleDef,
    ScheduleMark,
    def_key,
    definition,
    fire_key,
    mark,
    mark_key,
    names,
)


class ScheduleOutcome(StrEnum):
    """What a ``K`` entry did (``ApplyResult.schedule``); the node answers by it."""

    CREATED = "created"
    UNCHANGED = "unchanged"  # created before with the same definition
    EXISTS = "exists"  # the name is taken by another definition
    LIMIT = "limit"  # MAX_SCHEDULES exist
    NOT_FOUND = "not_found"
    PAUSED = "paused"
    ACTIVE = "active"
    DELETED = "deleted"


CREATE, PAUSE, RESUME, DELETE = "create", "pause", "resume", "delete"


def apply_schedule(store: Storage, tx: Transaction, entry: Entry, w: Watermark, res: ApplyResult) -> None:
    """A ``K`` entry; ``res.schedule`` says what it did."""
    op, name = entry.schedule.get("op"), entry.schedule.get("name")
    if not isinstance(name, str) or op not in (CREATE, PAUSE, RESUME, DELETE):
        raise BadEntryError(f"schedule entry with op {op!r} and name {name!r}")
    meta = store.current_meta
    if op == CREATE:
        res.schedule = _create(store, tx, entry, res.raft_index)
        return
    d, m = definition(meta, name), mark(meta, name)
    if d is None or m is None:
        res.schedule = ScheduleOutcome.NOT_FOUND
        return
    if op == PAUSE:
        if not d.paused:
            _cancel_planned(store, tx, entry, d, m, w, res)
            tx.set_meta(def_key(name), replace(d, paused=True).to_wire())
            tx.set_meta(mark_key(name), ScheduleMark(m.incarnation, m.mark).to_wire())
        res.schedule = ScheduleOutcome.PAUSED
    elif op == RESUME:
        if d.paused:
            tx.set_meta(def_key(name), replace(d, paused=False).to_wire())
            tx.set_meta(mark_key(name), ScheduleMark(m.incarnation, max(m.mark, entry.clock_ms)).to_wire())
        res.schedule = ScheduleOutcome.ACTIVE
    else:
        _cancel_planned(store, tx, entry, d, m, w, res)
        tx.set_meta(def_key(name), None)
        # The floor of a schedule made again under the name. One deleted before its start
        # produced nothing (its mark stands just before the start): it leaves none.
        floor = m.mark if d.start_at is None or m.mark >= d.start_at else entry.clock_ms
        tx.set_meta(mark_key(name), ScheduleMark(m.incarnation, floor).to_wire())
        tx.set_meta(NAMES_KEY, [n for n in names(meta) if n != name])
        _drop_passed_floors(store, tx, entry.clock_ms)
        res.schedule = ScheduleOutcome.DELETED


def _create(store: Storage, tx: Transaction, entry: Entry, raft_index: int) -> ScheduleOutcome:
    meta = store.current_meta
    try:
        wanted = ScheduleDef.from_wire(entry.schedule["def"])
    except (KeyError, TypeError, ValueError) as e:
        raise BadEntryError(f"schedule entry with a bad definition: {e}") from e
    name = entry.schedule["name"]
    if wanted.name != name:
        raise BadEntryError(f"schedule entry for {name!r} defines {wanted.name!r}")
    held = definition(meta, name)
    if held is not None:
        return ScheduleOutcome.UNCHANGED if held.same_request(wanted) else ScheduleOutcome.EXISTS
    taken = names(meta)
    if len(taken) >= MAX_SCHEDULES:
        return ScheduleOutcome.LIMIT
    made = replace(wanted, paused=False, created_at=entry.clock_ms, incarnation=raft_index)
    start = entry.clock_ms
    if made.start_at is not None:
        start = max(start, made.start_at - 1)
    floor = mark(meta, name)  # left by a deleted schedule of that name
    if floor is not None:
        start = max(start, floor.mark)
    tx.set_meta(def_key(name), made.to_wire())
    tx.set_meta(mark_key(name), ScheduleMark(raft_index, start).to_wire())
    tx.set_meta(NAMES_KEY, sorted([*taken, name]))
    _drop_passed_floors(store, tx, entry.clock_ms)
    return ScheduleOutcome.CREATED


def apply_fires(store: Storage, tx: Transaction, entry: Entry, w: Watermark, res: ApplyResult) -> None:
    """An ``F`` entry: each schedule's firings, where its mark still stands where they were
    planned from; the others are left out (``res.schedule`` counts nothing for them)."""
    meta = store.current_meta
    messages: list[Message] = []
    for f in entry.fires:
        d, m = definition(meta, f.name), mark(meta, f.name)
        if (
            d is None
            or m is None
            or d.paused
            or d.incarnation != f.incarnation
            or m.incarnation != f.incarnation
            or m.mark != f.from_mark
            or f.to_mark <= f.from_mark
        ):
            continue  # planned from a view this entry no longer matches
        fires = sorted({t for t in f.fires if f.from_mark < t <= f.to_mark and d.allows(t)})
        headers = {**d.headers, SCHEDULE_HEADER: d.name}
        messages += [
            Message(d.topic, d.body, t, entry.clock_ms, d.tags, fire_key(d.name, t), headers) for t in fires
        ]
        tx.set_meta(
            mark_key(f.name),
            ScheduleMark(m.incarnation, f.to_mark, _planned(store, d, m, fires, w, entry)).to_wire(),
        )
    if messages:
        store_messages(store, tx, MessageColumns.from_messages(messages), w, entry.clock_ms, res)


def _planned(
    store: Storage, d: ScheduleDef, m: ScheduleMark, fires: list[int], w: Watermark, entry: Entry
) -> tuple[int, ...]:
    """What a pause or a delete is to cancel after this entry stored ``fires``: the fire
    times of the last ``PLANNED_KEPT_MS`` and ahead; of those further behind, every one the
    wheel has not reached (a catch-up after an outage, produced a minute late or more,
    while the wheel fast-forwards: this entry's own are not stored yet, so none is looked
    up) and the latest ``PLANNED_MOVED_KEPT`` it passed whose firing still waits
    (rescheduled later: looked up by key)."""
    recent = entry.clock_ms - PLANNED_KEPT_MS
    times = sorted({*m.planned, *fires})
    lately = [p for p in times if p > recent]
    older = times[: len(times) - len(lately)]
    waiting = [p for p in older if not w.passed(p)]
    moved = [p for p in older if w.passed(p) and _still_scheduled(store, d, p, w)]
    return (*sorted({*waiting, *moved[-PLANNED_MOVED_KEPT:]}), *lately)


def _still_scheduled(store: Storage, d: ScheduleDef, fire_ms: int, w: Watermark) -> bool:
    """Whether the firing of ``d`` at ``fire_ms`` waits still: rescheduled later, say, it
    stays in ``planned``, for a pause or a delete to cancel."""
    (mid,) = targets_of(store, [], [(d.topic, fire_key(d.name, fire_ms))])
    return mid is not None and message_state(store, store.current_place(mid), w) == SCHEDULED


def _cancel_planned(
    store: Storage,
    tx: Transaction,
    entry: Entry,
    d: ScheduleDef,
    m: ScheduleMark,
    w: Watermark,
    res: ApplyResult,
) -> None:
    """Cancel the schedule's firings produced and not yet delivered: a cancel by key of
    each, as ``DELETE /v1/messages?topic=&key=`` does (a firing rescheduled since included)."""
    keys = [(d.topic, fire_key(d.name, t)) for t in m.planned]
    cancel_messages(store, tx, replace(entry, kind=CANCEL, ids=[], keys=keys), w, res)


def _drop_passed_floors(store: Storage, tx: Transaction, clock_ms: int) -> None:
    """Forget the marks of deleted schedules once the clock is past them: a schedule
    created again under the name then starts after its clock anyway."""
    meta = store.current_meta
    live = set(names(meta))
    for key in store.meta_keys():
        if key.startswith(MARK_PREFIX):
            name = key[len(MARK_PREFIX) :]
            m = mark(meta, name)
            if name not in live and m is not None and m.mark <= clock_ms:
                tx.set_meta(key, None)
