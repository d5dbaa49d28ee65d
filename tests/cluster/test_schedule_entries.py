"""The schedule entries applied by the state machine without Raft: ``K`` (create, pause,
resume, delete) and ``F`` (firings), deterministic and never firing twice."""

from __future__ import annotations

from horologe.cluster import CANCELLED, DELIVERED, SCHEDULED, SYNC, Entry, StateMachine, decode
from horologe.cluster.committed_reads import counters, message_status, pending_by_topic
from horologe.cluster.entries import FIRE, MOVE, SCHEDULE
from horologe.cluster.schedule_apply import ScheduleOutcome
from horologe.cluster.schedule_state import (
    Firings,
    ScheduleDef,
    definition,
    fire_key,
    mark,
    names,
)
from horologe.wheel import ALL, Watermark

from .entry_log import EntryLog, T, machine
from .same_files import assert_same_files

S = 1000


def every_second(name: str = "tick", body: bytes = b"ping", **kw) -> ScheduleDef:
    return ScheduleDef(name, "t", body, "* * * * * *", "UTC", **kw)


class Log(EntryLog):
    def apply(self, kind, ws: Watermark | None = None, **fields):
        res = self.append(kind, ws, **fields)
        assert res.error is None, res.error
        return res

    def control(self, op: str, name: str, **more) -> ScheduleOutcome:
        return ScheduleOutcome(self.apply(SCHEDULE, schedule={"op": op, "name": name, **more}).schedule)

    def create(self, d: ScheduleDef) -> ScheduleOutcome:
        return self.control("create", d.name, **{"def": d.to_wire()})

    def fire(self, *firings: Firings):
        return self.apply(FIRE, fires=list(firings))

    def deliver_to(self, ms: int) -> None:
        self.clock = max(self.clock, ms)
        self.apply(SYNC, ws=Watermark(ms, ALL))

    def state(self, name: str, fire_ms: int) -> str:
        store = self.sm.store
        mid = store.lookup_key("t", fire_key(name, fire_ms))
        return "unknown" if mid is None else message_status(store, mid).state


def meta(sm: StateMachine):
    return sm.store.current_meta


def test_create_answers_by_what_the_log_holds(tmp_path):
    log = Log(machine(tmp_path))
    assert log.create(every_second()) == ScheduleOutcome.CREATED
    d, m = definition(meta(log.sm), "tick"), mark(meta(log.sm), "tick")
    assert (d.created_at, d.incarnation, d.paused) == (T, 1, False)
    assert (m.incarnation, m.mark, m.planned) == (1, T, ())  # nothing before the create fires
    assert log.create(every_second()) == ScheduleOutcome.UNCHANGED  # a retried create
    assert log.create(every_second(tags=("other",))) == ScheduleOutcome.EXISTS
    assert definition(meta(log.sm), "tick").incarnation == 1
    assert log.control("pause", "nope") == ScheduleOutcome.NOT_FOUND
    assert names(meta(log.sm)) == ["tick"]


def test_start_at_sets_the_first_mark(tmp_path):
    log = Log(machine(tmp_path))
    log.create(every_second("later", start_at=T + 60 * S))
    assert mark(meta(log.sm), "later").mark == T + 60 * S - 1


def test_firings_are_keyed_messages_and_move_the_mark(tmp_path):
    log = Log(machine(tmp_path))
    log.create(every_second(headers={"h": "v"}))
    fires = tuple(T + k * S for k in range(1, 4))
    res = log.fire(Firings("tick", 1, T, T + 3 * S, fires))
    assert len(res.ids) == 3 and res.pending_slots.tolist() == list(fires)
    m = mark(meta(log.sm), "tick")
    assert (m.mark, m.planned) == (T + 3 * S, fires)
    stored = log.sm.store.read_message(log.sm.store.lookup_key("t", f"schedule:tick:{T + S}")).message
    assert (stored.body, stored.deliver_at_ms, stored.produced_at_ms) == (b"ping", T + S, T)
    assert stored.headers == {"h": "v", "x-horologe-schedule": "tick"}
    assert pending_by_topic(log.sm.store) == {"t": 3}


def test_a_firing_planned_twice_is_stored_once(tmp_path):
    """A stale master's plan from an old mark does nothing; planning always resumes at the mark."""
    log = Log(machine(tmp_path))
    log.create(every_second())
    first = Firings("tick", 1, T, T + 3 * S, tuple(T + k * S for k in range(1, 4)))
    log.fire(first)
    assert len(log.fire(first).ids) == 0  # the same plan again
    overlapping = Firings("tick", 1, T, T + 5 * S, tuple(T + k * S for k in range(1, 6)))
    assert len(log.fire(overlapping).ids) == 0  # planned from where the mark no longer is
    assert mark(meta(log.sm), "tick").mark == T + 3 * S
    assert len(log.fire(Firings("tick", 1, T + 3 * S, T + 5 * S, (T + 4 * S, T + 5 * S))).ids) == 2
    assert counters(log.sm.store)["stored"] == 5


def test_fire_times_outside_the_plan_or_the_schedule_are_left_out(tmp_path):
    log = Log(machine(tmp_path))
    log.create(every_second(end_at=T + 3 * S))
    res = log.fire(Firings("tick", 1, T, T + 10 * S, (T, T + S, T + 2 * S, T + 3 * S, T + 11 * S)))
    assert sorted(log.sm.store.read_message(i).message.deliver_at_ms for i in res.ids) == [T + S, T + 2 * S]


def test_firings_behind_the_clock_are_produced_and_delivered_at_once(tmp_path):
    """After an outage planning resumes at the mark: what passed is produced late, not skipped."""
    log = Log(machine(tmp_path))
    log.create(every_second())
    log.deliver_to(T + 10 * S)
    res = log.fire(Firings("tick", 1, T, T + 12 * S, tuple(T + k * S for k in range(1, 13))))
    assert res.delivered == 10  # T+1 s .. T+10 s: due already
    assert log.state("tick", T + 10 * S) == DELIVERED and log.state("tick", T + 11 * S) == SCHEDULED
    assert mark(meta(log.sm), "tick").planned == tuple(T + k * S for k in range(1, 13))


def test_pause_cancels_what_is_planned_and_stops_firings(tmp_path):
    log = Log(machine(tmp_path))
    log.create(every_second())
    log.fire(Firings("tick", 1, T, T + 4 * S, tuple(T + k * S for k in range(1, 5))))
    log.deliver_to(T + 2 * S)
    assert log.control("pause", "tick") == ScheduleOutcome.PAUSED
    assert [log.state("tick", T + k * S) for k in range(1, 5)] == [DELIVERED, DELIVERED, CANCELLED, CANCELLED]
    assert pending_by_topic(log.sm.store) == {"t": 0} and counters(log.sm.store)["cancelled"] == 2
    assert len(log.fire(Firings("tick", 1, T + 4 * S, T + 6 * S, (T + 5 * S, T + 6 * S))).ids) == 0
    assert log.control("pause", "tick") == ScheduleOutcome.PAUSED  # again: the same answer
    assert definition(meta(log.sm), "tick").paused


def test_resume_plans_from_now_and_skips_what_passed_while_paused(tmp_path):
    log = Log(machine(tmp_path))
    log.create(every_second())
    log.fire(Firings("tick", 1, T, T + 4 * S, tuple(T + k * S for k in range(1, 5))))
    log.control("pause", "tick")
    log.clock = T + 60 * S
    assert log.control("resume", "tick") == ScheduleOutcome.ACTIVE
    m = mark(meta(log.sm), "tick")
    assert (m.mark, m.planned) == (T + 60 * S, ())
    assert len(log.fire(Firings("tick", 1, T + 60 * S, T + 61 * S, (T + 61 * S,))).ids) == 1
    # resumed at once, before the cancelled firings' time: they stay cancelled, planning goes on after
    log.control("pause", "tick")
    log.clock = T + 60 * S + 500
    log.control("resume", "tick")
    assert mark(meta(log.sm), "tick").mark == T + 61 * S
    assert log.control("resume", "tick") == ScheduleOutcome.ACTIVE


def test_delete_cancels_and_a_schedule_made_again_starts_past_the_old_one(tmp_path):
    log = Log(machine(tmp_path))
    log.create(every_second())
    log.fire(Firings("tick", 1, T, T + 4 * S, tuple(T + k * S for k in range(1, 5))))
    assert log.control("delete", "tick") == ScheduleOutcome.DELETED
    assert log.state("tick", T + 4 * S) == CANCELLED
    assert definition(meta(log.sm), "tick") is None and names(meta(log.sm)) == []
    assert log.control("delete", "tick") == ScheduleOutcome.NOT_FOUND
    # a firing planned for the deleted one does nothing to the new one
    assert log.create(every_second(body=b"new")) == ScheduleOutcome.CREATED
    again = definition(meta(log.sm), "tick")
    assert again.incarnation == log.index and mark(meta(log.sm), "tick").mark == T + 4 * S
    assert len(log.fire(Firings("tick", 1, T + 4 * S, T + 5 * S, (T + 5 * S,))).ids) == 0
    # once the clock is past it, a deleted schedule's mark is forgotten
    log.control("delete", "tick")
    log.clock = T + 10 * S
    log.create(every_second("other"))
    assert mark(meta(log.sm), "tick") is None


def test_a_schedule_deleted_before_it_started_leaves_its_name_free(tmp_path):
    """Its mark stands just before its start, though it produced nothing: kept as the
    floor of a schedule made again under the name, that one fired nothing until then."""
    log = Log(machine(tmp_path))
    log.create(every_second(start_at=T + 180 * 86_400 * S))
    for paused in (False, True):
        if paused:
            log.create(every_second(start_at=T + 180 * 86_400 * S))
            log.control("pause", "tick")
        assert log.control("delete", "tick") == ScheduleOutcome.DELETED
        log.create(every_second(body=b"new"))
        assert mark(meta(log.sm), "tick").mark == log.clock
        log.control("delete", "tick")


def test_entries_round_trip_and_two_nodes_hold_the_same_bytes(tmp_path):
    a = Log(machine(tmp_path / "a"))
    a.create(every_second())
    a.fire(Firings("tick", 1, T, T + 2 * S, (T + S, T + 2 * S)))
    a.control("pause", "tick")
    a.clock = T + 5 * S
    a.control("resume", "tick")
    a.fire(Firings("tick", 1, T + 5 * S, T + 7 * S, (T + 6 * S, T + 7 * S)))
    a.deliver_to(T + 6 * S)
    a.control("delete", "tick")
    fire = decode(a.blobs[1])
    assert fire.kind == FIRE and fire.fires == [Firings("tick", 1, T, T + 2 * S, (T + S, T + 2 * S))]
    assert decode(a.blobs[2]).schedule == {"op": "pause", "name": "tick"}
    b = machine(tmp_path / "b")
    for i, blob in enumerate(a.blobs, 1):
        assert b.apply(i, blob).error is None
    a.sm.store.close()
    b.store.close()
    assert_same_files(tmp_path / "a", tmp_path / "b")


def test_a_bad_schedule_entry_is_skipped_on_every_node(tmp_path):
    sm = machine(tmp_path)
    blob = Entry(SCHEDULE, Watermark(T), T, schedule={"op": "explode", "name": "x"}).encode()
    res = sm.apply(1, blob)
    assert res.error is not None and sm.halted is None
    bad_def = {"op": "create", "name": "x", "def": {"bogus": 1}}
    blob = Entry(SCHEDULE, Watermark(T), T, schedule=bad_def).encode()
    assert sm.apply(2, blob).error is not None and sm.halted is None


def test_pause_cancels_a_firing_rescheduled_since(tmp_path):
    log = Log(machine(tmp_path))
    log.create(every_second())
    log.fire(Firings("tick", 1, T, T + 2 * S, (T + S, T + 2 * S)))
    moved = log.apply(MOVE, keys=[("t", fire_key("tick", T + 2 * S))], deliver_at=[T + 30 * S])
    assert moved.cancels == [SCHEDULED]
    log.control("pause", "tick")
    assert pending_by_topic(log.sm.store) == {"t": 0}
    log.deliver_to(T + 40 * S)
    assert log.sm.store.read_ready("t").size == 0  # neither the firing nor its moved copy


def test_pause_cancels_a_firing_rescheduled_since_a_minute_after_its_first_time(tmp_path):
    """A firing's time left ``planned`` (what a pause or a delete cancels by key) a minute
    after it, rescheduled or not: a firing moved later escaped a pause made after that."""
    log = Log(machine(tmp_path))
    log.create(every_second())
    log.fire(Firings("tick", 1, T, T + 2 * S, (T + S, T + 2 * S)))
    log.apply(MOVE, keys=[("t", fire_key("tick", T + 2 * S))], deliver_at=[T + 600 * S])
    log.deliver_to(T + 5 * S)
    log.clock = T + 70 * S  # the next firings a minute past the moved one's first time
    log.fire(Firings("tick", 1, T + 2 * S, T + 3 * S, (T + 3 * S,)))
    assert mark(meta(log.sm), "tick").planned == (T + 2 * S,)  # the moved one kept
    log.control("pause", "tick")
    assert log.state("tick", T + 2 * S) == CANCELLED


def test_the_firings_kept_for_a_pause_once_rescheduled_are_the_latest_few(tmp_path, monkeypatch):
    """Every firing an application rescheduled later stayed in the mark, looked up and
    rewritten by each F entry: a schedule every second whose firings were all put off a
    month held millions."""
    monkeypatch.setattr("horologe.cluster.schedule_apply.PLANNED_MOVED_KEPT", 1)
    log = Log(machine(tmp_path))
    log.create(every_second())
    log.fire(Firings("tick", 1, T, T + 2 * S, (T + S, T + 2 * S)))
    for fire in (T + S, T + 2 * S):
        log.apply(MOVE, keys=[("t", fire_key("tick", fire))], deliver_at=[T + 600 * S])
    log.deliver_to(T + 5 * S)  # the wheel passed their first times (one it has not reached stays)
    log.clock = T + 70 * S
    log.fire(Firings("tick", 1, T + 2 * S, T + 3 * S, (T + 3 * S,)))
    assert mark(meta(log.sm), "tick").planned == (T + 2 * S,)  # the latest moved one only


def test_firings_caught_up_a_minute_late_behind_a_lagging_wheel_are_cancelled_by_a_pause(tmp_path):
    """After an outage the master plans from the mark: firings over a minute behind its
    clock, stored scheduled while its wheel catches up. Only the firings already stored
    were looked up for ``planned``, so this entry's own were left out, and a pause (say,
    to stop the flood) answered 200 while the wheel delivered them after it."""
    log = Log(machine(tmp_path))
    log.create(every_second())
    log.clock = T + 600 * S  # the wheel's watermark stays behind, at T
    log.fire(Firings("tick", 1, T, T + 660 * S, tuple(T + k * S for k in range(1, 661))))
    assert log.state("tick", T + 10 * S) == SCHEDULED
    log.control("pause", "tick")
    assert log.state("tick", T + 10 * S) == CANCELLED
