"""node/ops/gc_pauses.py: every real collection is counted once, in its generation, in /metrics form."""

from __future__ import annotations

import gc

from prometheus_client import CollectorRegistry, generate_latest

from horologe.node.ops.gc_pauses import GcPauses


def _samples(pauses: GcPauses) -> dict[str, float]:
    reg = CollectorRegistry()
    reg.register(pauses)
    lines = generate_latest(reg).decode().splitlines()
    return {k: float(v) for k, v in (ln.rsplit(" ", 1) for ln in lines if not ln.startswith("#"))}


def test_each_collection_is_counted_in_its_generation():
    pauses = GcPauses()
    pauses.install()
    gc.disable()  # only the collections asked for below
    try:
        for _ in range(3):
            gc.collect(2)
        gc.collect(1)
    finally:
        gc.enable()
        pauses.uninstall()
    gc.collect(2)  # after uninstall: not counted
    s = _samples(pauses)
    assert s['horologe_gc_pause_seconds_count{generation="2"}'] == 3
    assert s['horologe_gc_pause_seconds_count{generation="1"}'] == 1
    assert s['horologe_gc_pause_seconds_bucket{generation="2",le="+Inf"}'] == 3
    assert s['horologe_gc_pause_seconds_sum{generation="2"}'] > 0
    assert (
        0
        < s["horologe_gc_pause_longest_seconds"]
        <= s['horologe_gc_pause_seconds_sum{generation="2"}']
        + s['horologe_gc_pause_seconds_sum{generation="1"}']
    )


def test_buckets_are_cumulative():
    pauses = GcPauses()
    pauses.install()
    try:
        for _ in range(5):
            gc.collect(0)
    finally:
        pauses.uninstall()
    s = _samples(pauses)
    buckets = [v for k, v in s.items() if k.startswith('horologe_gc_pause_seconds_bucket{generation="0"')]
    assert buckets == sorted(buckets)
    assert buckets[-1] >= 5  # young collections the test itself triggered may add to the five
