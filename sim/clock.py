"""Virtual time for the simulator: every clock the Raft shell and pysyncobj read, patched.

One process runs one simulation, single-threaded; its clocks are the world's:

* the monotonic clock (``time.monotonic``, ``time.clock_gettime`` of the monotonic clocks,
  ``perf_counter``) is the world's virtual time, the same on every node, as on one Linux
  host, unless a node's clock drifts (the fault plan): then, read in that node's steps, it
  is its own (:class:`Drift`);
* the wall clock (``time.time``) is the true virtual wall time; a node's own wall clock
  (``RaftNode(clock=)``) is that plus the node's skew and drift, which the fault plan sets;
* ``time.sleep`` raises: nothing in a tick may wait on real time.

pysyncobj binds its monotonic clock (``pysyncobj.monotonic.monotonic``, a lambda over
``time.clock_gettime``) into several modules under other names (``monotonicTime`` in
syncobj, transport, tcp_connection and cluster/raft/seam.py; ``monotonic_time`` in
cluster/raft/node.py): every module attribute bound to that function is rebound too, so
the patch does not depend on ``clock_gettime`` being looked up at call time.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pysyncobj.monotonic

# Virtual monotonic time at the world's start: a host up a day, so that a clock stepped
# back an hour stays above zero (pysyncobj takes a deadline of 0 for "at once").
MONOTONIC_START_S = 86_400.0
WALL_START_MS = 1_767_225_600_000 - 4_000  # 4 s before an hour (2026-01-01 00:00 UTC): hours roll


class SimTimeError(RuntimeError):
    """Something waited on real time inside the simulation."""


class Drift:
    """One node's oscillator: its time runs ``rate`` faster than the world's (negative:
    slower) since ``since_ns``, on top of ``ahead_ns`` gained (or stepped) before; it goes
    back only when a fault steps it back."""

    def __init__(self) -> None:
        self.ahead_ns = 0
        self.rate = 0.0
        self.since_ns = 0

    def local_ns(self, ns: int) -> int:
        return ns + self.ahead_ns + int(self.rate * (ns - self.since_ns))

    def true_ns(self, local_ns: int) -> int:
        """The first world time at which this oscillator reads ``local_ns`` or later."""
        ns = math.ceil((local_ns - self.ahead_ns + self.rate * self.since_ns) / (1 + self.rate))
        while self.local_ns(ns) < local_ns:  # float rounding
            ns += 1
        return ns

    def step(self, delta_ns: int) -> None:
        """A step of the clock (libfaketime's, in the chaos suite): forward, or back, which
        a running process takes for a fault of the system (cluster/raft/monotonic_watch.py)."""
        self.ahead_ns += delta_ns

    def set_rate(self, ns: int, rate: float) -> None:
        self.ahead_ns = self.local_ns(ns) - ns
        self.rate, self.since_ns = rate, ns

    @property
    def off(self) -> bool:
        return self.ahead_ns == 0 and self.rate == 0.0


class VirtualClock:
    """The world's time, in integer nanoseconds since its start; only the world moves it.
    ``drift``: the drift of the node whose step runs (the world sets it), None for none."""

    def __init__(self) -> None:
        self.ns = 0
        self.drift: Drift | None = None

    def local_ns(self) -> int:
        return self.ns if self.drift is None else self.drift.local_ns(self.ns)

    def monotonic(self) -> float:
        return MONOTONIC_START_S + self.local_ns() / 1e9

    def monotonic_ns(self) -> int:
        return int(MONOTONIC_START_S * 1e9) + self.local_ns()

    def wall_ms(self) -> int:
        """True wall time, in epoch ms."""
        return WALL_START_MS + self.ns // 1_000_000

    def wall_s(self) -> float:
        return WALL_START_MS / 1000 + self.ns / 1e9


def _no_sleep(seconds: float) -> None:
    raise SimTimeError(f"time.sleep({seconds}) inside the simulation")


@contextmanager
def patched(clock: VirtualClock) -> Iterator[None]:
    """Every clock the shell reads runs on ``clock`` inside the block; put back after."""
    original_monotonic = pysyncobj.monotonic.monotonic
    real_clock_gettime = time.clock_gettime
    monotonic_ids = {time.CLOCK_MONOTONIC, time.CLOCK_MONOTONIC_RAW}

    def clock_gettime(clk_id: int) -> float:
        if clk_id in monotonic_ids:
            return clock.monotonic()
        if clk_id == time.CLOCK_REALTIME:
            return clock.wall_s()
        return real_clock_gettime(clk_id)

    replacements: dict[str, Callable] = {
        "monotonic": clock.monotonic,
        "monotonic_ns": clock.monotonic_ns,
        "perf_counter": clock.monotonic,
        "perf_counter_ns": clock.monotonic_ns,
        "clock_gettime": clock_gettime,
        "time": clock.wall_s,
        "time_ns": lambda: WALL_START_MS * 1_000_000 + clock.ns,
        "sleep": _no_sleep,
    }
    saved_time = {name: getattr(time, name) for name in replacements}
    rebound: list[tuple[object, str]] = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for name, value in list(namespace.items()):
            if value is original_monotonic:
                rebound.append((module, name))
    try:
        for name, fn in replacements.items():
            setattr(time, name, fn)
        for module, name in rebound:
            setattr(module, name, clock.monotonic)
        yield
    finally:
        for name, fn in saved_time.items():
            setattr(time, name, fn)
        for module, name in rebound:
            setattr(module, name, original_monotonic)
