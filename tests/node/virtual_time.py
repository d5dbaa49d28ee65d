"""asyncio on virtual time for node-component tests: what a test asserts about *when*
things happen holds on any machine, however busy.

The loop is the simulator's (sim/loop.py: asyncio's own, whose selector never waits);
its clock starts at 0 and moves only when nothing is ready to run, straight to the
earliest timer. Work between two timers takes no virtual time: a test that wants a step
to cost time sleeps for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine

from sim.loop import SimLoop

MIN_STEP_S = 1e-6


class VirtualLoop(SimLoop):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0  # seconds

    def time(self) -> float:
        return self.now

    def call_at(self, when, callback, *args, context=None):
        """A timer is set a microsecond ahead at least. asyncio runs the timers due within
        its clock's resolution in the turn at hand, so a wait as short as a float's last
        bit (a sync interval's remainder) would fire at once, forever, the clock never
        moving."""
        return super().call_at(max(when, self.now + MIN_STEP_S), callback, *args, context=context)

    def call_soon(self, callback, *args, context=None):
        """The same for ``asyncio.timeout``, which runs its expiry at once rather than as a
        timer when the deadline is not after the clock: a wait of a float's last bit."""
        if isinstance(getattr(callback, "__self__", None), asyncio.Timeout):
            return self.call_at(self.now, callback, *args, context=context)
        return super().call_soon(callback, *args, context=context)

    def run(self, coro: Coroutine):
        """Run ``coro`` to its end, the clock jumping from timer to timer; its result. What
        it left running (a failed assertion skips the clean-up) is cancelled, as
        ``asyncio.run`` does, and the loop closed."""
        task = self.create_task(coro)
        try:
            self._until_done([task])
            return task.result()
        finally:
            rest = [t for t in asyncio.all_tasks(self) if not t.done()]
            for t in rest:
                t.cancel()
            self._until_done(rest)
            self.close()

    def _until_done(self, tasks: list[asyncio.Task]) -> None:
        while not all(t.done() for t in tasks):
            when = self.next_turn()
            if when is None:
                raise RuntimeError("the test waits on nothing: no callback ready, no timer set")
            self.now = max(self.now, when)
            self.turn()
