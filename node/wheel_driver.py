"""The master-only asyncio driver of the time wheel.

Started when this node becomes master and cancelled when it stops being one (the node
calls :meth:`WheelDriver.start` and :meth:`WheelDriver.cancel` on role changes; no
polling; a release awaits :meth:`WheelDriver.stop`). Leading: it commits a barrier
entry (so everything committed before is applied and in the committed view), builds
the wheel on that view from the committed watermark, realigns against its clock
(sleep while the tick is ahead, fast-forward while it is behind), then loops: fire
what is due and propose ``S`` with the new watermark, then sleep until the next due
message, the next turn (``turn_ms``), or an earlier arrival. A turn with nothing fired
proposes an ``S`` only once ``sync_interval_ms`` passed since the last, so an idle master
writes an entry (an append and an fsync on every node) only that often. Its wheel still
moves on every turn, and every proposal carries the wheel's watermark
(:attr:`WheelDriver.ws`), which is so never more than a turn behind the clock plus half
the lead: a message produced due before it is delivered as its entry applies, with no
``S`` of its own (one the wheel passed after its entry was stamped, by an ``S`` proposed
as it applies: :meth:`WheelDriver.on_append`). A turn does not wait for its ``S`` to
commit before the next (up to ``syncs_in_flight`` of them), so what falls due during a
commit is fired on time and committed by the next ``S``.

**Fire lead.** The wheel runs ``lead_ms`` ahead of the clock: what falls due by
``clock + lead_ms`` is fired and committed now, stamped with the clock, so the Raft round
trip is over by the deliver time. The wheel runs half the lead ahead, and the whole lead
once the next message is due within that half: under a steady flow one ``S`` covers at
least half a lead of deliveries (an ``S`` each 10 ms at the default 20, not one each
turn), which spares the three nodes most of the commits they share two cores for. Consumers
hand a ready message out only once it is due
(node/consumers/service.py), and each node records ``max(clock, deliver time)`` as its
``delivered_at``, so nothing is early; a cancel or reschedule must commit before the
message is fired to win: ``lead_ms`` before its deliver time, earlier in a hot stretch
(docs/cluster.md, "Fire lead").

**Hot stretches.** When more than ``fire_batch_limit`` falls due within the lead, those
batches take longer than the lead to commit back to back, and the last reached the ready
log after its time. So the lead stretches with what is pending before a message: the
batches are fired a lead apart, the last one a lead ahead of its time, and none more than
``lead_max_ms`` ahead (wheel/hot_lead.py).

It is given only what it needs: the committed view's reads and watermark, a
``propose_sync(clock_ms)`` that stamps and proposes an ``S`` entry, and a clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from horologe.cluster import ClusterError
from horologe.storage.store_reads import StoreReads
from horologe.wheel import Sleep, TimeWheel, Watermark, ranks_looked_at, realign, stretched_lead

from .leader_task import LeaderTask

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WheelSettings:
    fire_batch_limit: int
    sync_interval_ms: int
    node_id: str = ""
    syncs_in_flight: int = 2  # S entries proposed before the wheel waits for the oldest
    # The longest wait between turns (at most sync_interval_ms): each looks for a hot
    # stretch and moves the watermark that proposals carry.
    turn_ms: int = 50
    lead_ms: int = 0  # how far ahead of the clock the wheel fires (the module docstring)
    lead_max_ms: int = 0  # how far ahead at most it fires a hot stretch (the module docstring)


class WheelDriver(LeaderTask):
    def __init__(
        self,
        reads: StoreReads,
        committed_ws: Callable[[], Watermark],
        propose_sync: Callable[[int], Awaitable[object]],
        clock: Callable[[], int],
        settings: WheelSettings,
        *,
        clock_known: Callable[[], bool] = lambda: True,
        each_turn: Callable[[], None] = lambda: None,
        damaged: Callable[[BaseException], bool] = lambda e: False,
    ) -> None:
        """``clock_known``: whether the clock may be trusted yet (the wheel waits for it);
        ``each_turn``: called at the top of every turn (the node checks its clock there);
        ``damaged(e)``: whether a failed turn met damaged files (node/store_damage.py: the
        node halts, and hands over)."""
        super().__init__(self._run, "wheel")
        self._reads = reads
        self._committed_ws = committed_ws
        self._propose_sync = propose_sync
        self._clock = clock
        self._settings = settings
        self._clock_known = clock_known
        self._each_turn = each_turn
        self._damaged = damaged
        self.wheel: TimeWheel | None = None
        # S entries this process proposed as master that were committed (one proposed just
        # before the role was lost may count once it commits), and the clock reading (ms)
        # that the latest of them carried.
        self.syncs_led = 0
        self.last_sync_led_ms: int | None = None
        self._wake = asyncio.Event()
        self._sync_owed = False  # messages stored pending behind the wheel wait for an S

    @property
    def ws(self) -> Watermark:
        """The watermark to piggyback on proposals: the wheel's when leading, else the committed one."""
        w = self.wheel
        return w.ws if w is not None else self._committed_ws()

    def wake(self) -> None:
        """Cut the current wait short (new arrivals)."""
        self._wake.set()

    def on_append(self, slots: np.ndarray) -> None:
        """New messages were applied on this master (called after the view followed them),
        stored pending at ``slots``. One the wheel has passed (its entry was stamped before
        a turn moved the wheel past it) is never fired by the wheel: the next ``S``, which
        carries the wheel's watermark, delivers it, and is proposed at once."""
        w = self.wheel
        if w is None or not len(slots):
            return
        if w.ws.passed_many(slots).any():
            self._sync_owed = True
            self.wake()
        if w.on_append(slots):
            self.wake()

    async def _run(self) -> None:
        while True:
            try:
                await self._lead()
            except ClusterError as e:
                log.info("wheel turn failed (%s); leading again", e)
            except Exception as e:
                if not self._damaged(e):
                    log.exception("wheel driver failed; leading again")
            finally:
                self.wheel = None
            await asyncio.sleep(0.1)
            self._check_leading()

    def _check_leading(self) -> None:
        """End this run unless it is the current one. Checked after every wait, because a
        cancel can be lost (asyncio.wait_for in 3.11 swallows one that races a result)."""
        if not self.is_current():
            raise asyncio.CancelledError

    def _sync(self, now: int) -> asyncio.Future:
        """Propose an ``S`` stamped ``now`` at once; the future ends once it is committed.

        The task that waits for the proposal is never cancelled (a run that stops waiting
        cancels the shield around it), and its outcome is always taken: a task cancelled
        before its first step never awaits the proposal it was given, and asyncio logs the
        proposal's refusal as an exception never retrieved (the simulator's node services,
        seed 159: a master's clocks stepped an hour ahead, and it stepped down in the turn
        that proposed an S)."""
        committed = self._propose_sync(now)

        async def count() -> None:
            await committed
            self.syncs_led += 1
            self.last_sync_led_ms = max(now, self.last_sync_led_ms or now)

        task = asyncio.get_running_loop().create_task(count())
        task.add_done_callback(_seen)
        return asyncio.shield(task)

    async def _lead(self) -> None:
        cfg = self._settings

        def wheel_time() -> int:  # the node's clock plus the fire lead
            return self._clock() + cfg.lead_ms

        while not self._clock_known():
            await asyncio.sleep(0.02)  # no time to fire by until a majority's clocks are in
            self._check_leading()
        await self._sync(self._clock())  # barrier: all earlier entries applied and in the view
        self._check_leading()
        # No bound from the watermark: the store bounds each deliver time from its produce
        # time (MessageLimits), and the watermark trails the clock that stamped it, by a sync
        # or by a whole outage. Bounded here, a message at the limit threw in on_append, and
        # the other slots of its entry never reached the wheel.
        self.wheel = TimeWheel(self._reads, self._committed_ws(), max_delay_ms=None)
        plan = realign(self.wheel.ws, wheel_time(), cfg.fire_batch_limit)
        log.info("%s leads the wheel from %s: %s", cfg.node_id, self.wheel.ws.to_wire(), plan)
        if isinstance(plan, Sleep):
            while wheel_time() < plan.until_ms:
                await asyncio.sleep(min(0.05, (plan.until_ms - wheel_time()) / 1000))
                self._check_leading()
        interval = cfg.sync_interval_ms / 1000
        turn_ms = min(cfg.turn_ms, cfg.sync_interval_ms)
        half_lead = cfg.lead_ms // 2
        monotonic = asyncio.get_running_loop().time  # the loop's clock paces the S entries
        last_sync = monotonic()
        # S entries proposed and not yet seen committed, oldest first. The next turn need
        # not wait for the last one: entries commit in order, and each carries the whole
        # watermark, so a later S delivers all an earlier one would.
        syncing: deque[asyncio.Future] = deque()
        try:
            while True:
                # Cleared before looking, so an arrival reported while this turn runs
                # still cuts the coming wait short.
                self._wake.clear()
                self._each_turn()
                now = self._clock()
                first = self.wheel.next_due_ms()
                # Half the lead ahead, and the whole lead once something is due within the half.
                lead = cfg.lead_ms if first is not None and first <= now + half_lead else half_lead
                # More than a batch due within two leads: their batches a lead apart (hot
                # stretch). Not looked at while a whole batch is due by the plain lead (a
                # wheel far behind: the look would walk all it is behind, every turn).
                through, stretched_at = now + lead, None
                if len(self.wheel.pending_slots(now + lead, cfg.fire_batch_limit)) < cfg.fire_batch_limit:
                    pending = self.wheel.pending_slots(
                        now + max(cfg.lead_max_ms, lead) + turn_ms,
                        ranks_looked_at(cfg.lead_ms, cfg.fire_batch_limit, cfg.lead_max_ms),
                    )
                    through, stretched_at = stretched_lead(
                        pending, now, lead, cfg.lead_ms, cfg.fire_batch_limit, cfg.lead_max_ms
                    )
                due = self.wheel.advance_to(through, cfg.fire_batch_limit)
                nxt = self.wheel.next_due_ms()
                if len(due) or self._sync_owed or monotonic() - last_sync >= interval:
                    self._sync_owed = False
                    syncing.append(self._sync(now))
                    last_sync = monotonic()
                while syncing and (syncing[0].done() or len(syncing) >= cfg.syncs_in_flight):
                    await syncing.popleft()  # a refused S ends this run
                    self._check_leading()
                if len(due) >= cfg.fire_batch_limit:
                    continue  # more is due: fast-forward without sleeping
                wait = min(turn_ms / 1000, interval - (monotonic() - last_sync))
                if nxt is not None:  # woken once it is due within half the lead
                    wait = min(wait, (nxt - self._clock() - half_lead) / 1000)
                if stretched_at is not None:  # or once a hot stretch's next batch is to be fired
                    wait = min(wait, (stretched_at - self._clock()) / 1000)
                if wait > 0:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(wait):  # not wait_for: it can drop a cancel
                            await self._wake.wait()
                    self._check_leading()
        finally:
            _let_go(syncing)


def _let_go(syncing: deque[asyncio.Future]) -> None:
    """Stop waiting for S entries still in flight (they commit or not on their own:
    ``_sync``), and mark as seen the failures of those that ended unawaited: the run ends
    for another reason (else asyncio logs "exception was never retrieved": the simulator's
    node services, seed 624)."""
    for waiting in syncing:
        if waiting.done():
            _seen(waiting)
        else:
            waiting.cancel()


def _seen(done: asyncio.Future) -> None:
    if not done.cancelled():
        done.exception()
