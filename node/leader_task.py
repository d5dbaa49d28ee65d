"""The one pattern for what only the master runs: the wheel, push delivery, retention and
recurring schedules (DESIGN §4: the elected master alone turns the wheel).

Each is a :class:`LeaderTask`: the node starts it when it becomes master and cancels it
when it stops leading (``NodeService._on_role``, on the loop, through the crossing), and
closes it at shutdown. A run that lost and regained the role waits until the cancelled run
has let go before it begins. The periodic ones run :func:`every`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from horologe.cluster import ClusterError, NotMasterError

from .errors import Refused

log = logging.getLogger(__name__)


class LeaderTask:
    """``run()``, run while this node leads. Loop thread only."""

    def __init__(self, run: Callable[[], Awaitable[None]], name: str) -> None:
        self._run = run
        self.name = name
        self._task: asyncio.Task | None = None  # leading
        self._stopping: set[asyncio.Task] = set()  # cancelled, not finished yet
        self._closed = False

    @property
    def leading(self) -> bool:
        return self._task is not None

    def is_current(self) -> bool:
        """Whether the calling task is this one's current run (not a cancelled one)."""
        return self._task is not None and asyncio.current_task() is self._task

    def start(self) -> bool:
        """Run (this node became master); a no-op, False, while it already runs or once closed."""
        if self._task is not None or self._closed:
            return False
        previous = set(self._stopping)
        self._task = asyncio.get_running_loop().create_task(self._after(previous), name=self.name)
        return True

    async def _after(self, previous: set[asyncio.Task]) -> None:
        if previous:  # a quick loss and regain of the role: every run cancelled lets go first
            await asyncio.wait(previous)
        await self._run()

    def cancel(self) -> None:
        """Stop (this node no longer leads); the run ends shortly. A run cancelled while
        it waited for an earlier one to let go ends at once: the next waits for that one."""
        if self._task is not None:
            self._task.cancel()
            self._stopping.add(self._task)
            self._task.add_done_callback(self._stopping.discard)
            self._task = None

    async def stop(self) -> None:
        """Stop and wait until every run has ended."""
        self.cancel()
        if self._stopping:
            await asyncio.wait(set(self._stopping))  # their cancellation is not ours

    async def close(self) -> None:
        """Stop for good (the node shuts down): a role change after this starts nothing."""
        self._closed = True
        await self.stop()


async def every(
    interval_ms: int,
    turn: Callable[[], Awaitable[bool]],
    what: str,
    damaged: Callable[[BaseException], bool] = lambda e: False,
) -> None:
    """Each ``interval_ms``, run ``turn`` until it says nothing more waits (False). A turn
    refused for the moment (no master, no quorum, a refusal) or failed is logged and
    tried again the next time; one that met damaged files is reported to ``damaged``
    (node/store_damage.py: the node halts and stops leading)."""
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            while await turn():
                pass
        except (Refused, NotMasterError, ClusterError) as e:
            log.info("%s turn skipped: %s", what, e)
        except Exception as e:  # a read failed (say a file cut meanwhile), or a bug: try next turn
            if not damaged(e):
                log.exception("%s turn failed; trying again next turn", what)
