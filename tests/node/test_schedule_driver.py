"""The master's schedule turn over a real state machine and committed view, on a fake clock:
it plans a horizon ahead from the replicated mark, refills at half, catches up after an
outage in bounded entries, and never fires anything twice or skips it."""

from __future__ import annotations

import asyncio

import pytest
from croniter import CroniterBadCronError

from horologe.cluster import schedule_times
from horologe.cluster.entries import FIRE, SCHEDULE
from horologe.cluster.schedule_plan import Planner
from horologe.cluster.schedule_state import ScheduleDef, definition, mark
from horologe.node.schedules.driver import ScheduleDriver
from horologe.node.schedules.service import schedule_json
from horologe.storage import StorageConfig

from .local_log import LocalLog

T = 1_767_225_600_000
S = 1000
HORIZON = 60 * S


@pytest.fixture
def log(tmp_path):
    now = [T]
    log = LocalLog(str(tmp_path / "s"), lambda: now[0], StorageConfig(fsync=False))
    log.now = now
    yield log
    log.close()


def driver(log: LocalLog, leads=lambda: True) -> ScheduleDriver:
    async def propose_fires(firings):
        return await log.propose(FIRE, fires=firings)

    return ScheduleDriver(log.view.reads, propose_fires, log.clock, Planner(HORIZON), 1000, leads)


def create(log: LocalLog, body: bytes = b"x", **kw) -> None:
    name, cron, zone = kw.pop("name", "tick"), kw.pop("cron", "* * * * * *"), kw.pop("timezone", "UTC")
    d = ScheduleDef(name, "t", body, cron, zone, **kw)
    asyncio.run(log.propose(SCHEDULE, schedule={"op": "create", "name": d.name, "def": d.to_wire()}))


def fired(log: LocalLog) -> list[int]:
    """Every firing stored, by deliver time, in the order stored."""
    return [
        log.machine.store.read_message(mid).message.deliver_at_ms
        for res in log.applied
        if res.kind == FIRE
        for mid in res.ids
    ]


def run_turns(d: ScheduleDriver) -> int:
    """Turns until nothing more is waiting; how many proposed something."""

    async def go() -> int:
        n = 0
        while True:
            before = d.fires_proposed
            more = await d.turn()
            n += d.fires_proposed > before
            if not more:
                return n

    return asyncio.run(go())


def test_plans_a_horizon_ahead_and_refills_at_half(log):
    create(log)
    d = driver(log)
    assert run_turns(d) == 1
    assert fired(log) == [T + k * S for k in range(1, 61)]
    assert mark(log.view.reads.meta, "tick").mark == T + HORIZON
    assert run_turns(d) == 0  # planned a whole horizon ahead: no entry
    log.now[0] = T + 29 * S
    assert run_turns(d) == 0  # more than half is left
    log.now[0] = T + 31 * S
    assert run_turns(d) == 1
    assert fired(log) == [T + k * S for k in range(1, 92)]


def test_a_schedule_this_master_cannot_plan_leaves_the_others_planned(log, monkeypatch):
    """A time zone the node that took a schedule knew, and this master's tzdata lacks (an
    older build): planning it raised, the turn was skipped, and no schedule fired at all."""
    create(log, name="a", timezone="America/Santiago")
    create(log, name="b")
    monkeypatch.setattr(schedule_times, "zone_names", lambda: frozenset({"UTC"}))
    assert run_turns(driver(log)) == 1
    assert fired(log) == [T + k * S for k in range(1, 61)]  # b's
    assert mark(log.view.reads.meta, "a").mark == T  # a waits, unplanned
    meta = log.view.reads.meta
    shown = {n: schedule_json(definition(meta, n), mark(meta, n), T)["next_fires"] for n in ("a", "b")}
    assert shown["a"] == [] and len(shown["b"]) == 5  # both listed all the same


@pytest.mark.parametrize("error", [CroniterBadCronError, OverflowError])
def test_a_schedule_whose_cron_this_master_cannot_read_leaves_the_others_planned(log, monkeypatch, error):
    """The node that took the schedule read its cron; this master's croniter (another
    release, in a rolling upgrade) does not: every turn raised, and no schedule fired."""
    create(log, name="a", cron="*/2 * * * * *")
    create(log, name="b")
    iterator = schedule_times._iterator

    def unreadable(expr, start):
        if expr.startswith("*/2"):
            raise error(f"[{expr}] is not acceptable")
        return iterator(expr, start)

    monkeypatch.setattr(schedule_times, "_iterator", unreadable)
    assert run_turns(driver(log)) == 1
    assert fired(log) == [T + k * S for k in range(1, 61)]  # b's
    meta = log.view.reads.meta
    assert schedule_json(definition(meta, "a"), mark(meta, "a"), T)["next_fires"] == []


def test_a_plan_from_a_stale_view_fires_nothing_twice(log):
    """Two masters planning from the same mark (a deposed one, a new one): the later F is a no-op."""
    create(log)
    stale = Planner(HORIZON).plan(log.view.reads.meta, log.clock())
    run_turns(driver(log))
    asyncio.run(log.propose(FIRE, fires=stale.firings))
    assert log.applied[-1].ids == [] and fired(log) == [T + k * S for k in range(1, 61)]


def test_after_an_outage_planning_resumes_at_the_mark_in_bounded_entries(log):
    create(log, body=b"b" * 100_000)  # ~10 firings per entry by the body budget
    d = driver(log)
    run_turns(d)
    log.now[0] = T + 10 * 60 * S  # ten minutes without a master
    entries = run_turns(d)
    got = fired(log)
    # every second once, none skipped, none twice, until more than half a horizon is planned
    assert got == [T + k * S for k in range(1, 631)]
    assert entries > 55 and all(len(r.ids) <= 10 for r in log.applied if r.kind == FIRE)


def test_a_schedule_far_behind_leaves_the_others_their_turn(log):
    """After an outage, a schedule behind by more than an entry's firings takes each
    entry whole; the ones after it by name waited until it caught up (an hour of every
    second: four entries, and a day's would be 87), and fired that much later."""
    create(log, name="a")
    create(log, name="b", cron="0 * * * * *")
    d = driver(log)
    run_turns(d)
    log.now[0] = T + 3600 * S  # an hour without a master
    asyncio.run(d.turn())
    assert mark(log.view.reads.meta, "a").mark < log.now[0]  # a's first entry: a thousand firings
    asyncio.run(d.turn())
    assert mark(log.view.reads.meta, "b").mark >= log.now[0] + HORIZON // 2  # b's turn came next
    run_turns(d)
    got = sorted(fired(log))
    assert got == sorted([T + k * S for k in range(1, 3661)] + [T + k * 60 * S for k in range(1, 62)])


def test_a_rare_schedule_keeps_its_mark_until_a_firing_is_due(log):
    create(log, cron="0 12 * * *")  # noon; the clock is at midnight
    d = driver(log)
    assert run_turns(d) == 0 and mark(log.view.reads.meta, "tick").mark == T
    log.now[0] = T + 12 * 3600 * S - 30 * S
    assert run_turns(d) == 1 and fired(log) == [T + 12 * 3600 * S]


def test_paused_ended_and_not_leading_plan_nothing(log):
    create(log, name="ended", end_at=T - 1)
    create(log, name="paused")
    asyncio.run(log.propose(SCHEDULE, schedule={"op": "pause", "name": "paused"}))
    assert run_turns(driver(log)) == 0
    create(log, name="tick")
    assert run_turns(driver(log, leads=lambda: False)) == 0
    assert fired(log) == []
