"""The node's clock: the only place that reads wall time. Everything below takes ms."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]


def system_clock(offset_ms: int = 0) -> Clock:
    def now_ms() -> int:
        return time.time_ns() // 1_000_000 + offset_ms

    return now_ms
