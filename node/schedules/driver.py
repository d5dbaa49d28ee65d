"""The master's schedule loop: every ``schedule_check_ms``, propose the firings of recurring
schedules that cluster/schedule_plan.py plans (docs/api.md, "Recurring schedules").

It runs while this node is master (a :class:`~horologe.node.leader_task.LeaderTask`), and
a turn proposes only while it may lead: not releasing, sure of its clock, not halted.
The plan is made on the committed view by the master's (quorum-bounded)
clock and proposed as one ``F`` entry; when a budget cut it short (a schedule far behind
after an outage), the next turn follows at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from horologe.cluster.schedule_plan import Planner
from horologe.cluster.schedule_state import Firings
from horologe.storage.store_reads import StoreReads

from ..leader_task import LeaderTask, every

log = logging.getLogger(__name__)


class ScheduleDriver(LeaderTask):
    def __init__(
        self,
        reads: StoreReads,
        propose_fires: Callable[[list[Firings]], Awaitable[object]],
        clock: Callable[[], int],
        planner: Planner,
        interval_ms: int,
        may_lead: Callable[[], bool],
    ) -> None:
        super().__init__(self._run, "schedules")
        self._reads = reads
        self._propose_fires = propose_fires
        self._clock = clock
        self.planner = planner
        self.interval_ms = interval_ms
        self._may_lead = may_lead
        self.fires_proposed = 0
        self._failed: dict[str, str] = {}  # schedules the last turn could not plan, why

    async def _run(self) -> None:
        await every(self.interval_ms, self.turn, "schedule")

    async def turn(self) -> bool:
        """Propose the firings due for planning now, if this node may lead; True when more
        are waiting (a budget ran out)."""
        if not self._may_lead():
            return False
        plan = self.planner.plan(self._reads.meta, self._clock())
        for name, why in plan.failed:
            if self._failed.get(name) != why:  # once, not every turn
                log.warning("schedule %s is not planned on this node: %s", name, why)
        self._failed = dict(plan.failed)
        if not plan.firings:
            return False
        await self._propose_fires(plan.firings)
        self.fires_proposed += sum(len(f.fires) for f in plan.firings)
        return plan.more
