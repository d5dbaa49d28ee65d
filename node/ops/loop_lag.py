"""How late the event loop runs what it scheduled: a probe for anything that blocks it.

Every ``interval_ms`` a sleep is started; the lag is how much later than asked it returns.
A loop that waits on a lock held across an fsync, or on a long scan, shows here as lag,
whatever request happened to be waiting. The figures cover the last ``window`` samples.
"""

from __future__ import annotations

import asyncio
from collections import deque

import numpy as np


class LoopLag:
    def __init__(self, interval_ms: float = 1.0, window: int = 10_000) -> None:
        self.interval_s = interval_ms / 1000
        self._samples: deque[float] = deque(maxlen=window)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self._samples.append(max(0.0, loop.time() - asked))

    def figures(self) -> dict:
        """``{p99_ms, max_ms, samples}`` over the window (zeros before the first sample)."""
        if not self._samples:
            return {"p99_ms": 0.0, "max_ms": 0.0, "samples": 0}
        lags = np.fromiter(self._samples, dtype=float) * 1000
        return {
            "p99_ms": round(float(np.percentile(lags, 99)), 3),
            "max_ms": round(float(lags.max()), 3),
            "samples": len(lags),
        }
