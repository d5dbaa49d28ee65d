"""The master's push worker: delivers the messages of push groups by POSTing them.

Started when this node becomes master and cancelled when it stops being one (the node
calls :meth:`PushWorker.start` and :meth:`PushWorker.cancel` on role changes, as it does
the wheel's). Leading, it keeps one aiohttp session (a pool of kept-alive connections)
and one task per push subscription (cluster/push_state.py), which loops:

1. wait until its flow control (node/push_flow.py) lets a request start;
2. lease up to that many messages of the group exactly as a pull does (the consumers'
   pull: the topic's ready log, then the group's retries of it; a long poll woken when
   messages become ready, so nothing is polled);
3. send each (node/push_sender.py) and, when it ends, ack it on a 2xx, else nack it (the
   next retry level, brought forward by ``Retry-After``; after the last, ``%DLQ%<group>``).

Leases live in the master's memory and acks are replicated before they are answered, so
after a failover the next master sends again what was not acked, and only that: delivery
is at least once, and ``Horologe-Message-Id`` lets a receiver drop a repeat.

Before it leases anything, a new master commits an entry of its own term and waits until
it is applied (``barrier``): a new Raft leader may not yet know that its predecessor's
last acks are committed, and would push those messages again.

It is given what it needs as callables: the subscriptions of the committed view, the
barrier, the consumers' pull, ack and nack, the clock (ms, for signatures) and a monotonic
one (s, for the rate), and this node's ``push_allow``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
from yarl import URL

from horologe.cluster import ClusterError
from horologe.cluster.push_state import PushDef

from .consumers import Handed, Pulled
from .errors import ApiError
from .push_allow import PushAllow
from .push_flow import Flow
from .push_sender import Sent, push_body, send

log = logging.getLogger(__name__)

PULL_WAIT_MS = 1000  # a lease's long poll; leases that expire and retries falling due end it too
LEASE_MARGIN_MS = 30_000  # a lease outlives its request by this: room to commit the ack
CONNECTIONS = 512  # open connections of the pool, over every subscription
RETRY_PAUSE_S = 0.2  # after a lease failed (an election, a timeout)

Pull = Callable[[str, str, str, int, int, int], Awaitable[Pulled]]  # group, topic, tags, max, wait, lease
Ack = Callable[[str, list], Awaitable[int]]  # group, receipts
Nack = Callable[[str, list, int | None], Awaitable[dict]]  # group, receipts, retry_after_ms


@dataclass
class PushStats:
    """What this master pushed for one subscription since it became master."""

    delivered: int = 0  # answered 2xx and acked
    retried: int = 0  # failed and nacked to a retry level
    dead_lettered: int = 0  # failed after the last level: moved to %DLQ%<group>
    failed: int = 0  # every failed send (so retried + dead_lettered, and nacks that failed)
    in_flight: int = 0  # requests open now


class PushWorker:
    def __init__(
        self,
        subscriptions: Callable[[], list[PushDef]],
        barrier: Callable[[], Awaitable[object]],
        pull: Pull,
        ack: Ack,
        nack: Nack,
        clock: Callable[[], int],
        allow: PushAllow,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._subscriptions = subscriptions
        self._barrier = barrier
        self._pull = pull
        self._ack = ack
        self._nack = nack
        self._clock = clock
        self._monotonic = monotonic
        self.allow = allow
        self.stats: dict[tuple[str, str], PushStats] = {}  # (topic, group)
        self._task: asyncio.Task | None = None  # leading
        self._changed = asyncio.Event()
        self._closed = False

    def allowed(self, sub: PushDef) -> bool:
        """Whether this node's push_allow lets it send to the subscription's URL."""
        return self.allow.allows(URL(sub.url).host)

    def start(self) -> None:
        """Push (this node became master); a no-op while it already does, or once closed."""
        if self._task is None and not self._closed:
            self.stats = {}
            self._task = asyncio.get_running_loop().create_task(self._run())

    def cancel(self) -> None:
        """Stop pushing (this node is no longer master): open requests are dropped, and
        what they carried is sent again by the next master (it was not acked)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def close(self) -> None:
        """Stop for good (the node shuts down)."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def refresh(self) -> None:
        """Subscriptions may have changed (a ``U`` entry was applied): look again."""
        self._changed.set()

    async def _run(self) -> None:
        serving: dict[tuple[str, str], tuple[int, asyncio.Task]] = {}  # -> (incarnation, task)
        while True:
            try:
                await self._barrier()
                break
            except (ApiError, ClusterError) as e:
                log.info("push: barrier not committed (%s); trying again", e)
                await asyncio.sleep(RETRY_PAUSE_S)
        connector = aiohttp.TCPConnector(limit=CONNECTIONS)
        async with aiohttp.ClientSession(connector=connector) as session:
            try:
                while True:
                    self._changed.clear()
                    self._reconcile(session, serving)
                    await self._changed.wait()
            finally:
                # Before the session closes: a request cut by the close would be nacked.
                for _inc, task in serving.values():
                    task.cancel()
                await asyncio.gather(*(task for _inc, task in serving.values()), return_exceptions=True)

    def _reconcile(self, session: aiohttp.ClientSession, serving: dict) -> None:
        """One task per subscription, started over when its definition changed."""
        wanted = {(d.topic, d.group): d for d in self._subscriptions()}
        for key, (inc, task) in list(serving.items()):
            if key not in wanted or wanted[key].incarnation != inc:
                task.cancel()
                del serving[key]
        loop = asyncio.get_running_loop()
        for key, d in wanted.items():
            if key not in serving:
                serving[key] = (d.incarnation, loop.create_task(self._serve(session, d)))

    async def _serve(self, session: aiohttp.ClientSession, sub: PushDef) -> None:
        stats = self.stats.setdefault((sub.topic, sub.group), PushStats())
        if not self.allowed(sub):
            log.warning(
                "push %s/%s: this node's push_allow leaves out %s; nothing is pushed from here",
                sub.topic,
                sub.group,
                URL(sub.url).host,
            )
            return
        flow = Flow(sub.max_in_flight, sub.rate_per_s, self._monotonic)
        freed = asyncio.Event()
        sends: set[asyncio.Task] = set()
        lease_ms = sub.timeout_ms + LEASE_MARGIN_MS
        try:
            while True:
                room = flow.room()
                if room == 0:
                    if flow.full():
                        freed.clear()
                        await freed.wait()
                    else:
                        await asyncio.sleep(flow.token_wait_s())
                    continue
                try:
                    pulled = await self._pull(sub.group, sub.topic, sub.tags, room, PULL_WAIT_MS, lease_ms)
                except (ApiError, ClusterError) as e:
                    log.info("push %s/%s: lease failed (%s); trying again", sub.topic, sub.group, e)
                    await asyncio.sleep(RETRY_PAUSE_S)
                    continue
                except Exception:  # a read failed, or a bug: try again rather than stop pushing
                    log.exception("push %s/%s: lease failed; trying again", sub.topic, sub.group)
                    await asyncio.sleep(RETRY_PAUSE_S)
                    continue
                flow.take(len(pulled.messages))
                stats.in_flight = flow.in_flight
                for handed in pulled.messages:
                    task = asyncio.get_running_loop().create_task(self._deliver(session, sub, handed, stats))

                    def ended(t: asyncio.Task) -> None:
                        sends.discard(t)
                        flow.done()
                        stats.in_flight = flow.in_flight
                        freed.set()

                    sends.add(task)
                    task.add_done_callback(ended)
        finally:
            for task in list(sends):
                task.cancel()
            await asyncio.gather(*sends, return_exceptions=True)

    async def _deliver(
        self, session: aiohttp.ClientSession, sub: PushDef, handed: Handed, stats: PushStats
    ) -> None:
        body, fields = push_body(handed.record, handed.deliver_at, handed.delivered_at)
        sent = await send(session, sub, body, fields, self._clock())
        try:
            if sent.ok:
                await self._ack(sub.group, [handed.receipt])
                stats.delivered += 1
                return
            stats.failed += 1
            _log_failure(sub, fields, sent)
            done = await self._nack(sub.group, [handed.receipt], sent.retry_after_ms)
            stats.retried += done["retried"]
            stats.dead_lettered += done["dead_lettered"]
        except Exception as e:  # noqa: BLE001 - ApiError, ClusterError or a bug: the same outcome
            # Not acked: the lease runs out and it is sent again (by this master or the next).
            log.info(
                "push %s/%s: %s not settled (%s); sent again later", sub.topic, sub.group, fields["id"], e
            )


def _log_failure(sub: PushDef, fields: dict, sent: Sent) -> None:
    why = f"answered {sent.status}" if sent.status is not None else sent.error
    attempt = fields["attempt"]
    log.info("push %s/%s: %s attempt %d failed: %s", sub.topic, sub.group, fields["id"], attempt, why)
