"""The loop-lag probe sees a blocked event loop (a lower bound: a slow machine only adds)."""

from __future__ import annotations

import asyncio
import time

from horologe.node.ops.loop_lag import LoopLag


def test_a_blocked_loop_shows_as_lag():
    async def scenario() -> dict:
        probe = LoopLag(interval_ms=1)
        task = asyncio.create_task(probe.run())
        await asyncio.sleep(0.02)  # the probe ticks a while on a free loop (samples to compare)
        time.sleep(0.05)  # what a lock held across an fsync does to the loop: the point
        await asyncio.sleep(0.02)  # and the probe's late tick gets to run and be measured
        task.cancel()
        return probe.figures()

    figures = asyncio.run(scenario())
    assert figures["samples"] > 2
    assert figures["max_ms"] >= 45.0


def test_no_samples_no_figures():
    assert LoopLag().figures() == {"p99_ms": 0.0, "max_ms": 0.0, "samples": 0}
