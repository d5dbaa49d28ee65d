"""A node's asyncio event loop on virtual time, run one turn at a time by the world.

The loop is asyncio's own (``SelectorEventLoop``): its handles, timers, tasks and futures
run our real coroutines unchanged. Two things differ from a loop that runs forever:

* its selector never waits and never reports a ready file descriptor (nothing in the
  node service waits on a socket: Raft's network is the simulator's, sim/network.py);
* its time is the node's monotonic clock (sim/clock.py: the world's virtual time, with
  the node's drift), and the world runs a *turn* (asyncio's ``_run_once``: every callback
  ready then, after moving the timers that are due) as one step of the node, at the
  moment :func:`next_turn_ns` names.

A crash drops the loop with whatever it held: its tasks never run again.
"""

from __future__ import annotations

import asyncio
import heapq
import selectors
import time
from asyncio import events


class _NoWaitSelector(selectors.SelectSelector):
    """Registers the loop's self-pipe as asyncio wants, and never waits or reports it."""

    def select(self, timeout=None):
        return []


class SimLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        super().__init__(_NoWaitSelector())

    def time(self) -> float:
        return time.monotonic()  # patched: the node's own monotonic clock (sim/clock.py)

    def turn(self) -> None:
        """Run one turn: the callbacks ready now and the timers due now, as the running loop."""
        events._set_running_loop(self)
        try:
            self._run_once()
        finally:
            events._set_running_loop(None)

    def next_turn(self) -> float | None:
        """When, by this loop's clock, it has something to run: now if a callback is ready,
        else its earliest timer; None with neither."""
        if self._ready:
            return self.time()
        while self._scheduled and self._scheduled[0]._cancelled:
            # asyncio drops cancelled timers in its turns; a timer cancelled since the last
            # one must not wake the node
            self._discard_cancelled()
        return self._scheduled[0]._when if self._scheduled else None

    def _discard_cancelled(self) -> None:
        handle = heapq.heappop(self._scheduled)
        handle._scheduled = False
        self._timer_cancelled_count -= 1
