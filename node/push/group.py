"""One push subscription on the master: lease, send, settle in batches.

:func:`serve` runs until cancelled, in two tasks:

* the sender: waits until flow control (node/push/flow.py) lets requests start; leases up
  to that many messages of the group as a pull does (the consumers' pull: the group's
  retries of the topic fallen due, then its ready log; a long poll woken when messages become
  ready), including those the wheel made ready ahead of their time (its fire lead) that
  fall due within ``AHEAD_MS``; and sends each (node/push/sender.py makes the request,
  node/push/client.py sends it), signed with the clock read then: at once if it is due,
  else from a timer at its time, never before. While it holds messages for later it
  leases at most every ``LEASE_EVERY_S``, so a steady flow is leased some at a time,
  not one lease per message as each falls due;
* the settler: every push that ended since its last round (node/push/settle.py) is
  settled together, one ack for all those answered 2xx and one nack per ``Retry-After``
  among the others (the next retry level, brought forward by it; after the last level,
  ``%DLQ%<group>``), acks and nacks at once; then their flow-control slots are freed. A
  push that never found a free connection before its timeout (node/push/client.py: other
  receivers held them) is no attempt: its lease is given back, and it is sent again.

So a push holds its slot from its lease until its ack or nack is applied, and at a crash
at most ``max_in_flight`` pushes were answered and not acked. A settle that fails (an
election, the node no longer master) frees the slots all the same: what it carried was
not acked, its lease runs out, and it is sent again by this master or the next.
Cancelled (a subscription updated or deleted, the node no longer master), it drops the
requests still open, whose messages stay unacked, and gives back what it holds for
later; what was answered is settled first, for up to ``SETTLE_ON_STOP_S``, so that a
push answered 2xx is not sent again once its lease ran out. A planned stop (a release of
the master: ``draining``) lets the requests open end first, for up to as long, so that a
receiver that answers in time gets nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from horologe.cluster import ClusterError
from horologe.cluster.push_state import PushDef

from ..consumers.service import Handed, Pulled
from ..errors import NotFound, Refused
from .client import Exchange, PushHttp
from .flow import Flow
from .sender import Sent, Target, outcome, push_body, request
from .settle import Ended

log = logging.getLogger(__name__)

PULL_WAIT_MS = 1000  # a lease's long poll; leases that expire and retries falling due end it too
# A lease outlives its request by this: room to commit the ack. Leases are replicated, so
# after a failover a request left open is pushed again this long after its timeout.
LEASE_MARGIN_MS = 5_000
RETRY_PAUSE_S = 0.2  # after a lease failed (an election, a timeout)
AHEAD_MS = 10  # lease messages this long before they fall due (the wheel fires them earlier)
LEASE_EVERY_S = 0.004  # while some are held for later: less than AHEAD_MS, so none is late
SETTLE_ON_STOP_S = 5.0  # a stopping group's last acks and nacks: a commit's time, not a lease's

# group, topic, tags, max, wait, lease, ahead
Pull = Callable[[str, str, str, int, int, int, int], Awaitable[Pulled]]
GiveBack = Callable[[str, str, list], int]  # group, topic, receipts
Ack = Callable[[str, str, list], Awaitable[int]]  # group, topic, receipts
Nack = Callable[[str, str, list, int | None], Awaitable[dict]]  # group, topic, receipts, retry_after_ms


@dataclass
class PushStats:
    """What this master pushed for one subscription since it became master."""

    delivered: int = 0  # answered 2xx and acked
    retried: int = 0  # failed and nacked to a retry level
    dead_lettered: int = 0  # failed after the last level: moved to %DLQ%<group>
    failed: int = 0  # every failed send (so retried + dead_lettered, and nacks that failed)
    in_flight: int = 0  # leased and not yet settled: requests open, and answered ones being acked or nacked


@dataclass
class Consumer:
    """The consumers' calls a push group makes, and the clock that signs its pushes."""

    pull: Pull
    ack: Ack
    nack: Nack
    clock: Callable[[], int]  # ms
    give_back: GiveBack  # leases of messages not sent, handed out again at once
    # Whether a failed lease met damaged files (node/store_damage.py: the node halts).
    damaged: Callable[[BaseException], bool] = lambda e: False


async def serve(
    http: PushHttp,
    sub: PushDef,
    consumer: Consumer,
    flow: Flow,
    stats: PushStats,
    draining: Callable[[], bool] = lambda: False,
) -> None:
    """Push ``sub``'s messages until cancelled (see the module docstring); ``draining()``
    says whether a cancel is a planned stop (a release), which lets open requests end."""
    await _Group(http, sub, consumer, flow, stats, draining).run()


class _Group:
    def __init__(
        self,
        http: PushHttp,
        sub: PushDef,
        consumer: Consumer,
        flow: Flow,
        stats: PushStats,
        draining: Callable[[], bool],
    ) -> None:
        self.draining = draining
        self.http = http
        self.sub = sub
        self.consumer = consumer
        self.flow = flow
        self.stats = stats
        self.target = Target.of(sub.url)
        self.ended = Ended()
        self.arrived = asyncio.Event()  # a push ended: the settler has work
        self.freed = asyncio.Event()  # a settle freed slots: the sender may lease again
        self.open: set[Exchange] = set()
        self.held: dict[int, list[Handed]] = {}  # deliver ms -> leased, sent then
        self.timers: dict[int, asyncio.TimerHandle] = {}  # deliver ms -> its send
        self.stopping = False  # cancelled: what is still open is dropped, not a failed push

    async def run(self) -> None:
        settler = asyncio.get_running_loop().create_task(self._settle())
        try:
            await self._send()
        finally:
            for timer in self.timers.values():
                timer.cancel()
            self._give_back_held()
            if self.draining() and self.open:  # a planned stop: the requests open end first
                await asyncio.wait([exchange.future for exchange in self.open], timeout=SETTLE_ON_STOP_S)
            self.stopping = True
            for exchange in list(self.open):
                exchange.cancel()
            self.arrived.set()  # the settler's last round: what ended, then it returns
            try:
                async with asyncio.timeout(SETTLE_ON_STOP_S):
                    await asyncio.shield(settler)
            except (TimeoutError, asyncio.CancelledError):
                settler.cancel()  # not settled: those leases run out, and they are sent again
                await asyncio.gather(settler, return_exceptions=True)

    async def _send(self) -> None:
        sub, flow = self.sub, self.flow
        lease_ms = sub.timeout_ms + LEASE_MARGIN_MS
        while True:
            room = flow.room()
            if room == 0:
                if flow.full():
                    self.freed.clear()
                    await self.freed.wait()
                else:
                    await asyncio.sleep(flow.token_wait_s())
                continue
            try:
                pulled = await self.consumer.pull(
                    sub.group, sub.topic, sub.tags, room, PULL_WAIT_MS, lease_ms, AHEAD_MS
                )
            except (Refused, ClusterError) as e:
                log.info("push %s/%s: lease failed (%s); trying again", sub.topic, sub.group, e)
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            except Exception as e:  # a read failed, or a bug: try again rather than stop pushing
                if not self.consumer.damaged(e):  # damaged: the node halts and stops leading
                    log.exception("push %s/%s: lease failed; trying again", sub.topic, sub.group)
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            messages = pulled.messages
            flow.take(len(messages))
            self.stats.in_flight = flow.in_flight
            now_ms = self.consumer.clock()
            later = False
            for handed in messages:
                if handed.deliver_at > now_ms:
                    self._hold(handed, now_ms)
                    later = True
                else:
                    self._post(handed, now_ms)
            if later:
                await asyncio.sleep(LEASE_EVERY_S)

    def _hold(self, handed: Handed, now_ms: int) -> None:
        """Send ``handed`` at its deliver time, with the others due in the same ms."""
        at = handed.deliver_at
        if at not in self.held:
            self.held[at] = []
            self._arm(at, now_ms)
        self.held[at].append(handed)

    def _arm(self, at: int, now_ms: int) -> None:
        self.timers[at] = asyncio.get_running_loop().call_later((at - now_ms) / 1000, self._post_held, at)

    def _post_held(self, at: int) -> None:
        """``at``'s timer: send what it holds once the clock reads ``at`` (the clock may lag
        the timer, or step back: then wait again). A message that cannot be sent is a
        failed push (nacked), not a slot lost."""
        now_ms = self.consumer.clock()
        if now_ms < at:
            self._arm(at, now_ms)
            return
        del self.timers[at]
        for handed in self.held.pop(at):
            try:
                self._post(handed, now_ms)
            except Exception as e:  # noqa: BLE001 - a record that will not encode, or a bug
                log.exception("push %s/%s: could not send a message", self.sub.topic, self.sub.group)
                self.stats.failed += 1
                self.ended.add(handed.receipt, Sent(False, None, None, f"not sent: {e}"))
                self.arrived.set()

    def _give_back_held(self) -> None:
        """Stopping: what waits for its time was never sent; its leases end, so that this
        master (the subscription replaced) hands it out again at once, not a lease later."""
        receipts = [handed.receipt for held in self.held.values() for handed in held]
        self.held.clear()
        if receipts:
            _give_back(self.sub, self.consumer, receipts)

    def _post(self, handed: Handed, now_ms: int) -> None:
        body, fields = push_body(handed)
        data = request(self.target, self.sub.secret, body, fields, now_ms)
        exchange = self.http.post(self.target.origin, data, self.sub.timeout_ms / 1000)
        self.open.add(exchange)

        def answered(future: asyncio.Future) -> None:
            self.open.discard(exchange)
            answer = future.result()
            if answer.unsent and not self.stopping:  # never sent: no attempt, handed out again
                self.ended.add_unsent(handed.receipt)
                self.arrived.set()
                return
            # The clock only for a failure's Retry-After given as a date (ms from now).
            sent = outcome(answer, self.consumer.clock() if answer.retry_after is not None else 0)
            if self.stopping and not sent.ok:
                return  # dropped by the stop, or failed as it came: sent again after its lease
            if not sent.ok:
                self.stats.failed += 1
                _log_failure(self.sub, fields, sent)
            self.ended.add(handed.receipt, sent)
            self.arrived.set()

        exchange.future.add_done_callback(answered)

    async def _settle(self) -> None:
        sub, consumer, stats = self.sub, self.consumer, self.stats
        while True:
            if not self.stopping:  # stopping: no round waits, till nothing is left
                await self.arrived.wait()
            self.arrived.clear()
            if self.stopping and self.ended.count == 0:
                return
            batch = self.ended.take()
            calls = []
            if batch.acks:
                calls.append(_ack(sub, consumer, batch.acks, stats))
            for retry_after_ms, receipts in batch.nacks.items():
                calls.append(_nack(sub, consumer, receipts, retry_after_ms, stats))
            if batch.unsent:
                log.info(
                    "push %s/%s: %d pushes found no free connection in time (other receivers held "
                    "them); sent again",
                    sub.topic,
                    sub.group,
                    len(batch.unsent),
                )
                _give_back(sub, consumer, batch.unsent)
            try:
                await asyncio.gather(*calls)
            finally:
                self.flow.done(batch.count)
                stats.in_flight = self.flow.in_flight
                self.freed.set()


async def _ack(sub: PushDef, consumer: Consumer, receipts: list[str], stats: PushStats) -> None:
    try:
        await consumer.ack(sub.group, sub.topic, receipts)
        stats.delivered += len(receipts)
    except Exception as e:  # noqa: BLE001 - Refused, ClusterError or a bug: the same outcome
        _not_settled(sub, len(receipts), "acked", e)


async def _nack(
    sub: PushDef, consumer: Consumer, receipts: list[str], retry_after_ms: int | None, stats: PushStats
) -> None:
    try:
        done = await consumer.nack(sub.group, sub.topic, receipts, retry_after_ms)
    except Refused as e:
        if len(receipts) == 1 or not isinstance(e, NotFound):
            _not_settled(sub, len(receipts), "nacked", e)
            return
        # One of them names a message no longer there (trimmed): the others one by one.
        for receipt in receipts:
            await _nack(sub, consumer, [receipt], retry_after_ms, stats)
        return
    except Exception as e:  # noqa: BLE001 - ClusterError or a bug: the same outcome
        _not_settled(sub, len(receipts), "nacked", e)
        return
    stats.retried += done["retried"]
    stats.dead_lettered += done["dead_lettered"]


def _give_back(sub: PushDef, consumer: Consumer, receipts: list[str]) -> None:
    """End the leases of pushes never sent (held for their time as the group stopped, or
    found no free connection before their timeout): handed out again at once, no attempt
    counted."""
    try:
        consumer.give_back(sub.group, sub.topic, receipts)
    except Exception:  # noqa: BLE001 - the leases then run out, and they are sent again
        log.exception("push %s/%s: could not give back %d leases", sub.topic, sub.group, len(receipts))


def _not_settled(sub: PushDef, n: int, how: str, e: Exception) -> None:
    # Not settled: the leases run out and they are sent again (by this master or the next).
    log.info("push %s/%s: %d pushes not %s (%s); sent again later", sub.topic, sub.group, n, how, e)


def _log_failure(sub: PushDef, fields: dict, sent: Sent) -> None:
    why = f"answered {sent.status}" if sent.status is not None else sent.error
    attempt = fields["attempt"]
    log.info("push %s/%s: %s attempt %d failed: %s", sub.topic, sub.group, fields["id"], attempt, why)
