"""The master-only asyncio driver of the time wheel.

On becoming master it commits a barrier entry (so everything committed before is
applied), builds the wheel from the committed watermark, realigns against its clock
(sleep while the tick is ahead, fast-forward while it is behind), then loops: fire what
is due, propose ``S`` with the new watermark, sleep until the next due message, the
sync interval, or an earlier arrival. It stops the moment this node is not master.
"""

from __future__ import annotations

import asyncio
import logging
import time

from horologe.cluster import SYNC, ClusterError, Entry
from horologe.wheel import Sleep, TimeWheel, Watermark, realign

log = logging.getLogger(__name__)


class WheelDriver:
    def __init__(self, service) -> None:
        self.svc = service
        self.wheel: TimeWheel | None = None
        self.paused = False
        # S entries this process proposed as master that were committed, and the clock
        # reading (ms) that the latest of them carried.
        self.syncs_led = 0
        self.last_sync_led_ms: int | None = None
        self._wake = asyncio.Event()

    @property
    def ws(self) -> Watermark:
        """The watermark to piggyback on proposals: the wheel's when leading."""
        w = self.wheel
        return w.ws if w is not None else self.svc.state.ws

    def wake(self) -> None:
        """Cut the current wait short (new arrivals, or a release waiting for the loop)."""
        self._wake.set()

    def on_append(self, slots: list[int]) -> None:
        """From the apply listener (via call_soon_threadsafe): new messages on this master."""
        w = self.wheel
        if w is None or not slots:
            return
        with self.svc.lock:
            wake = w.on_append(slots)
        if wake:
            self.wake()

    async def run(self) -> None:
        while True:
            while self.paused or not self.svc.raft.is_master():
                await asyncio.sleep(0.01)
            try:
                await self._lead()
            except ClusterError as e:
                log.info("wheel stopped: %s", e)
            except Exception:
                log.exception("wheel driver failed; retrying")
                await asyncio.sleep(0.1)
            finally:
                self.wheel = None
                self.svc.consumers.forget_leases()

    def _still_master(self) -> bool:
        return self.svc.raft.is_master() and not self.paused

    async def _propose_sync(self, ws: Watermark, now: int) -> None:
        await self.svc.raft.propose(Entry(SYNC, ws, now).encode())
        self.syncs_led += 1
        self.last_sync_led_ms = now

    async def _lead(self) -> None:
        svc = self.svc
        clock = svc.clock
        svc.consumers.forget_leases()  # leases of an earlier term mean nothing now
        while self._still_master() and not svc.quorum_clock.known():
            await asyncio.sleep(0.02)  # no time to fire by until a majority's clocks are in
        await self._propose_sync(svc.state.ws, clock())  # barrier: all earlier entries applied
        with svc.lock:
            self.wheel = TimeWheel(svc.store, svc.state.ws)
        plan = realign(self.wheel.ws, clock(), svc.config.fire_batch_limit)
        log.info("%s leads the wheel from %s: %s", svc.config.node_id, self.wheel.ws.to_wire(), plan)
        if isinstance(plan, Sleep):
            while self._still_master() and clock() < plan.until_ms:
                await asyncio.sleep(min(0.05, (plan.until_ms - clock()) / 1000))
        interval = svc.config.sync_interval_ms / 1000
        last_sync = time.monotonic()
        while self._still_master():
            # Cleared before looking, so an arrival reported while this turn runs still
            # cuts the coming wait short.
            self._wake.clear()
            offset = svc.quorum_clock.offset_ms()
            if offset is not None and abs(offset) > svc.quorum_clock.tolerance_ms:
                svc.hand_over_for_clock(offset)
            now = clock()
            with svc.lock:
                due = self.wheel.advance_to(now, svc.config.fire_batch_limit)
                nxt = self.wheel.next_due_ms()
            if len(due) or time.monotonic() - last_sync >= interval:
                await self._propose_sync(self.wheel.ws, now)
                last_sync = time.monotonic()
            if len(due) >= svc.config.fire_batch_limit:
                continue  # more is due: fast-forward without sleeping
            wait = interval - (time.monotonic() - last_sync)
            if nxt is not None:
                wait = min(wait, (nxt - clock()) / 1000)
            if wait > 0:
                try:
                    await asyncio.wait_for(self._wake.wait(), wait)
                except TimeoutError:
                    pass
