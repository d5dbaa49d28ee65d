"""The node's side of recurring schedules: the ``K`` entries the API proposes, the answers
it gives from the committed view, and the master's planning loop (node/schedules/driver.py).

Every answer comes from what the entry did when applied (``ApplyResult.schedule``), so it
is definite: 201 created, 200 the same definition created before, 409 the name taken by
another, 404 no such schedule.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from horologe.cluster import ApplyResult
from horologe.cluster.entries import FIRE, SCHEDULE
from horologe.cluster.errors import InvalidScheduleError
from horologe.cluster.schedule_apply import CREATE, DELETE, PAUSE, RESUME, ScheduleOutcome
from horologe.cluster.schedule_plan import Planner, next_fires
from horologe.cluster.schedule_state import (
    MAX_SCHEDULES,
    Firings,
    ScheduleDef,
    ScheduleMark,
    definition,
    mark,
    names,
)
from horologe.storage.message_json import body_json

from ..committed_view import CommittedView
from ..errors import NotFound, ScheduleExists, TooManySchedules
from .driver import ScheduleDriver

Propose = Callable[..., Awaitable[ApplyResult]]  # NodeService.propose(kind, **fields)
NEXT_FIRES = 5


class Schedules:
    def __init__(
        self,
        view: CommittedView,
        propose: Propose,
        clock: Callable[[], int],
        horizon_ms: int,
        interval_ms: int,
        may_lead: Callable[[], bool],
    ) -> None:
        self._view = view
        self._propose = propose
        self._clock = clock
        self.driver = ScheduleDriver(
            view.reads, self._propose_fires, clock, Planner(horizon_ms), interval_ms, may_lead
        )

    async def _propose_fires(self, firings: list[Firings]) -> ApplyResult:
        return await self._propose(FIRE, fires=firings)

    async def _control(self, op: str, name: str, **more) -> ScheduleOutcome:
        res = await self._propose(SCHEDULE, schedule={"op": op, "name": name, **more})
        return ScheduleOutcome(res.schedule)

    # -- writes -------------------------------------------------------------------

    async def create(self, wanted: ScheduleDef) -> tuple[int, dict]:
        """(status, body): 201 made, 200 made before with the same definition."""
        done = await self._control(CREATE, wanted.name, **{"def": wanted.to_wire()})
        if done == ScheduleOutcome.EXISTS:
            raise ScheduleExists(f"a schedule named {wanted.name!r} exists with another definition", "name")
        if done == ScheduleOutcome.LIMIT:
            raise TooManySchedules(f"{MAX_SCHEDULES} schedules exist; delete one first", "name")
        return (201 if done == ScheduleOutcome.CREATED else 200), self.get(wanted.name)

    async def pause(self, name: str) -> dict:
        return self._answer(name, await self._control(PAUSE, name))

    async def resume(self, name: str) -> dict:
        return self._answer(name, await self._control(RESUME, name))

    async def delete(self, name: str) -> dict:
        self._found(name, await self._control(DELETE, name))
        return {"name": name, "state": "deleted"}

    def _answer(self, name: str, done: ScheduleOutcome) -> dict:
        self._found(name, done)
        return self.get(name)

    @staticmethod
    def _found(name: str, done: ScheduleOutcome) -> None:
        if done == ScheduleOutcome.NOT_FOUND:
            raise NotFound(f"no schedule named {name!r}", "name")

    # -- reads --------------------------------------------------------------------

    def get(self, name: str) -> dict:
        meta = self._view.reads.meta
        d = definition(meta, name)
        if d is None:
            raise NotFound(f"no schedule named {name!r}", "name")
        return schedule_json(d, mark(meta, name), self._clock())

    def list(self) -> list[dict]:
        meta, now = self._view.reads.meta, self._clock()
        return [schedule_json(d, mark(meta, n), now) for n in names(meta) if (d := definition(meta, n))]


def schedule_json(d: ScheduleDef, m: ScheduleMark | None, now_ms: int) -> dict:
    """A schedule as the API shows it; ``state`` is ``active``, ``paused``, or ``ended``
    (``end_at`` set and no fire time left before it)."""
    try:
        fires = next_fires(d, m, now_ms, NEXT_FIRES)
    except InvalidScheduleError:  # a time zone or cron this node cannot read: it cannot say
        fires = []
    state = "paused" if d.paused else "ended" if d.end_at is not None and not fires else "active"
    out: dict = {"name": d.name, "topic": d.topic, "cron": d.cron, "timezone": d.timezone, "state": state}
    out |= body_json(d.body) | {
        "tags": list(d.tags),
        "headers": d.headers,
        "start_at": d.start_at,
        "end_at": d.end_at,
        "created_at": d.created_at,
        "planned_until": None if m is None else m.mark,
        "next_fires": fires,
    }
    return out
