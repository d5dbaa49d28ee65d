"""Flow control of one push subscription: at most ``max_in_flight`` requests open at once,
and at most ``rate_per_s`` started per second (0: no limit).

The rate is a token bucket that holds a tenth of a second's worth (at least one): a hot
second due all at once reaches the receiver spread over the second, not in one burst,
and what waits stays in the ready log (unleased), where status and metrics count it.
Pure: the time comes from ``now()`` (seconds, monotonic), a parameter.
"""

from __future__ import annotations

import math
from collections.abc import Callable

BURST_S = 0.1  # the bucket holds this many seconds of the rate


class Flow:
    def __init__(self, max_in_flight: int, rate_per_s: int, now: Callable[[], float]) -> None:
        self.max_in_flight = max_in_flight
        self.rate = rate_per_s
        self.burst = max(1.0, rate_per_s * BURST_S) if rate_per_s else math.inf
        self.tokens = self.burst
        self.in_flight = 0
        self._now = now
        self._stamp = now()

    def _refill(self) -> None:
        t = self._now()
        if self.rate:
            self.tokens = min(self.burst, self.tokens + (t - self._stamp) * self.rate)
        self._stamp = t

    def room(self) -> int:
        """How many requests may start now."""
        self._refill()
        free = self.max_in_flight - self.in_flight
        return max(0, free if not self.rate else min(free, int(self.tokens)))

    def full(self) -> bool:
        """Every request slot is taken: wait for one to end."""
        return self.in_flight >= self.max_in_flight

    def token_wait_s(self) -> float:
        """How long until one more request may start, by the rate alone."""
        self._refill()
        return 0.0 if not self.rate or self.tokens >= 1 else (1 - self.tokens) / self.rate

    def take(self, n: int) -> None:
        """``n`` requests start (``n`` at most what ``room`` said)."""
        self.in_flight += n
        if self.rate:
            self.tokens -= n

    def done(self, n: int = 1) -> None:
        """``n`` requests ended (answered, failed or cancelled) and were settled."""
        self.in_flight -= n
