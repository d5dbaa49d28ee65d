"""The master's push worker: delivers the messages of push groups by POSTing them.

Started when this node becomes master and cancelled when it stops being one (the node
calls :meth:`PushWorker.start` and :meth:`PushWorker.cancel` on role changes, as it does
the wheel's). Leading, it keeps one pool of kept-alive connections (node/push/client.py)
and one task per push subscription (cluster/push_state.py), which leases the group's
messages as a pull does, POSTs each, and acks or nacks the ended pushes in batches
(node/push/group.py).

Leases live in the master's memory and acks are replicated before they are answered, so
after a failover the next master sends again what was not acked, and only that: delivery
is at least once, and ``Horologe-Message-Id`` lets a receiver drop a repeat.

Before it leases anything, a new master commits an entry of its own term and waits until
it is applied (``barrier``): a new Raft leader may not yet know that its predecessor's
last acks are committed, and would push those messages again.

It is given what it needs as callables: the subscriptions of the committed view, the
barrier, the consumers' pull, ack, nack and give-back, the clock (ms, for signatures)
and a monotonic one (s, for the rate), this node's ``push_allow``, and what makes the
pool its pushes go through while it leads (default: node/push/client.py's; the simulator
passes one that sends over its own network, sim/push.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from yarl import URL

from horologe.cluster import ClusterError
from horologe.cluster.push_state import PushDef

from ..errors import Refused
from ..leader_task import LeaderTask
from .allow import PushAllow
from .client import PushHttp
from .flow import Flow
from .group import Ack, Consumer, GiveBack, Nack, Pull, PushStats, serve

log = logging.getLogger(__name__)

CONNECTIONS = 512  # open connections of the pool, over every subscription
RETRY_PAUSE_S = 0.2  # after the barrier failed (an election, a timeout)

__all__ = ["PushStats", "PushWorker"]


class PushWorker(LeaderTask):
    def __init__(
        self,
        subscriptions: Callable[[], list[PushDef]],
        barrier: Callable[[], Awaitable[object]],
        pull: Pull,
        ack: Ack,
        nack: Nack,
        give_back: GiveBack,
        clock: Callable[[], int],
        allow: PushAllow,
        monotonic: Callable[[], float] = time.monotonic,
        damaged: Callable[[BaseException], bool] = lambda e: False,
        http: Callable[[], PushHttp] = lambda: PushHttp(CONNECTIONS),
    ) -> None:
        super().__init__(self._run, "push")
        self._http = http
        self._subscriptions = subscriptions
        self._barrier = barrier
        self._consumer = Consumer(pull, ack, nack, clock, give_back, damaged)
        self._monotonic = monotonic
        self.allow = allow
        self.stats: dict[tuple[str, str], PushStats] = {}  # (topic, group)
        self._changed = asyncio.Event()
        self._draining = False  # stopping for a release: open requests end first

    def allowed(self, sub: PushDef) -> bool:
        """Whether this node's push_allow lets it send to the subscription's URL."""
        return self.allow.allows(URL(sub.url).raw_host)  # a name as ASCII, as the list has it

    def start(self) -> bool:
        """Push (this node became master), counting afresh. Cancelled (no longer master),
        open requests are dropped, and what they carried is sent again by the next master
        (it was not acked)."""
        started = super().start()
        if started:
            self.stats = {}
        return started

    async def drain(self) -> None:
        """Stop for a release of the master: nothing more is sent, the requests open end
        and what was answered is acked before this returns, so the next master sends none
        of it again (the release waits for it a while at most: node/handover.py)."""
        self._draining = True
        try:
            await self.stop()
        finally:
            self._draining = False

    def refresh(self) -> None:
        """Subscriptions may have changed (a ``U`` entry was applied): look again."""
        self._changed.set()

    async def _run(self) -> None:
        serving: dict[tuple[str, str], tuple[int, asyncio.Task]] = {}  # -> (incarnation, task)
        while True:
            try:
                await self._barrier()
                break
            except (Refused, ClusterError) as e:
                log.info("push: barrier not committed (%s); trying again", e)
                await asyncio.sleep(RETRY_PAUSE_S)
        http = self._http()
        ending: set[asyncio.Task] = set()  # groups stopped, settling their last pushes
        try:
            while True:
                self._changed.clear()
                self._reconcile(http, serving, ending)
                await self._changed.wait()
        finally:
            for _inc, task in serving.values():
                task.cancel()
            tasks = [*(task for _inc, task in serving.values()), *ending]
            await asyncio.gather(*tasks, return_exceptions=True)
            await http.close()

    def _reconcile(self, http: PushHttp, serving: dict, ending: set[asyncio.Task]) -> None:
        """One task per subscription, started over when its definition changed; the
        stopped ones go to ``ending`` until they end. A subscription no longer wanted has
        its figures forgotten."""
        wanted = {(d.topic, d.group): d for d in self._subscriptions()}
        for key, (inc, task) in list(serving.items()):
            if key not in wanted or wanted[key].incarnation != inc:
                task.cancel()
                ending.add(task)
                task.add_done_callback(ending.discard)
                del serving[key]
        for key in [key for key in self.stats if key not in wanted]:
            del self.stats[key]
        loop = asyncio.get_running_loop()
        for key, d in wanted.items():
            if key not in serving:
                serving[key] = (d.incarnation, loop.create_task(self._serve(http, d)))

    async def _serve(self, http: PushHttp, sub: PushDef) -> None:
        stats = self.stats.setdefault((sub.topic, sub.group), PushStats())
        if not self.allowed(sub):
            log.warning(
                "push %s/%s: this node's push_allow leaves out %s; nothing is pushed from here",
                sub.topic,
                sub.group,
                URL(sub.url).raw_host,
            )
            return
        flow = Flow(sub.max_in_flight, sub.rate_per_s, self._monotonic)
        await serve(http, sub, self._consumer, flow, stats, lambda: self._draining)
