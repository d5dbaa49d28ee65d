"""How long the garbage collector stopped this process: ``horologe_gc_pause_seconds``.

A collection holds the GIL from start to end, so the event loop and the Raft tick
thread both stand still for it. ``gc.callbacks`` reports each start and stop; the
callback only does arithmetic on plain lists (no lock: collections never overlap, and a
lock taken here could be the one the collected thread already holds), and a scrape
reads them through prometheus-client's ``HistogramMetricFamily``.
"""

from __future__ import annotations

import bisect
import gc
import itertools
import time
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
GENERATIONS = ("0", "1", "2")


class GcPauses(Collector):
    def __init__(self) -> None:
        self._counts = [[0] * (len(BUCKETS) + 1) for _ in GENERATIONS]  # the last: past every bound
        self._sums = [0.0 for _ in GENERATIONS]
        self._longest = 0.0
        self._started = 0.0

    def install(self) -> None:
        gc.callbacks.append(self._on_gc)

    def uninstall(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        g = info["generation"]
        self._counts[g][bisect.bisect_left(BUCKETS, took)] += 1
        self._sums[g] += took
        self._longest = max(self._longest, took)

    def collect(self) -> Iterator:
        family = HistogramMetricFamily(
            "horologe_gc_pause_seconds",
            "time each garbage collection held the GIL (event loop and Raft tick thread stopped), "
            "by generation",
            labels=["generation"],
        )
        les = [*(repr(b) for b in BUCKETS), "+Inf"]
        for g, name in enumerate(GENERATIONS):
            total = list(itertools.accumulate(list(self._counts[g])))
            family.add_metric([name], list(zip(les, total, strict=True)), sum_value=self._sums[g])
        yield family
        yield GaugeMetricFamily(
            "horologe_gc_pause_longest_seconds",
            "the longest garbage collection pause since this process started",
            value=self._longest,
        )
