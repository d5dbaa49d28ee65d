"""The master's retention loop: every ``retention_check_ms``, propose the cut that
cluster/retention.py plans, when there is one (docs/cluster.md, "Retention").

It runs while this node is master (a :class:`~horologe.node.leader_task.LeaderTask`), and
a turn proposes only while it may lead: not releasing, sure of its clock, not halted.
The cut is planned on the committed view by the master's (quorum-bounded)
clock and proposed as one ``T`` entry; every node applies that same cut, clamped to its
committed state, so none ever cuts by its own clock.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from horologe.cluster.retention import Cut, plan
from horologe.storage.store_reads import StoreReads

from .leader_task import LeaderTask, every

log = logging.getLogger(__name__)


class RetentionDriver(LeaderTask):
    def __init__(
        self,
        reads: StoreReads,
        propose_cut: Callable[[Cut], Awaitable[object]],
        clock: Callable[[], int],
        retention_ms: int,
        interval_ms: int,
        may_lead: Callable[[], bool],
        damaged: Callable[[BaseException], bool] = lambda e: False,
    ) -> None:
        """``damaged(e)``: whether a failed turn met damaged files (node/store_damage.py)."""
        super().__init__(self._run, "retention")
        self._reads = reads
        self._propose_cut = propose_cut
        self._clock = clock
        self.retention_ms = retention_ms
        self.interval_ms = interval_ms
        self._may_lead = may_lead
        self._damaged = damaged
        self.cuts_proposed = 0

    async def _run(self) -> None:
        if self.retention_ms <= 0:
            return  # keep everything

        async def one_cut() -> bool:
            await self.turn()
            return False  # the next cut waits for the next turn

        await every(self.interval_ms, one_cut, "retention", self._damaged)

    async def turn(self) -> Cut | None:
        """Propose the cut due now, if this node may lead and there is one; return it."""
        if not self._may_lead():
            return None
        cut = plan(self._reads, self._clock(), self.retention_ms)
        if cut is None:
            return None
        await self._propose_cut(cut)
        self.cuts_proposed += 1
        log.info("retention: proposed the cut of %s", cut.describe())
        return cut
