"""The master's schedule loop: every ``schedule_check_ms``, propose the firings of recurring
schedules that cluster/schedule_plan.py plans (docs/api.md, "Recurring schedules").

Only a node that may lead runs a turn: the master, not releasing, sure of its clock and
not halted. The plan is made on the committed view by the master's (quorum-bounded)
clock and proposed as one ``F`` entry; when a budget cut it short (a schedule far behind
after an outage), the next turn follows at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from horologe.cluster import ClusterError, NotMasterError
from horologe.cluster.schedule_plan import Planner
from horologe.cluster.schedule_state import Firings
from horologe.storage.store_reads import StoreReads

from ..errors import Refused

log = logging.getLogger(__name__)


class ScheduleDriver:
    def __init__(
        self,
        reads: StoreReads,
        propose_fires: Callable[[list[Firings]], Awaitable[object]],
        clock: Callable[[], int],
        planner: Planner,
        interval_ms: int,
        may_lead: Callable[[], bool],
    ) -> None:
        self._reads = reads
        self._propose_fires = propose_fires
        self._clock = clock
        self.planner = planner
        self.interval_ms = interval_ms
        self._may_lead = may_lead
        self.fires_proposed = 0

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_ms / 1000)
            try:
                while await self.turn():
                    pass
            except (Refused, NotMasterError, ClusterError) as e:
                log.info("schedule turn skipped: %s", e)
            except Exception:  # a read failed, or a bug: try again next turn
                log.exception("schedule turn failed; trying again next turn")

    async def turn(self) -> bool:
        """Propose the firings due for planning now, if this node may lead; True when more
        are waiting (a budget ran out)."""
        if not self._may_lead():
            return False
        plan = self.planner.plan(self._reads.meta, self._clock())
        if not plan.firings:
            return False
        await self._propose_fires(plan.firings)
        self.fires_proposed += sum(len(f.fires) for f in plan.firings)
        return plan.more
