"""node/ops/metrics.py: bounded labels, and a batch histogram that buckets like prometheus-client's."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from horologe.node.ops.metrics import LATENESS_BUCKETS, OTHER, BatchHistogram, fold


def test_topics_past_the_cap_fold_into_other():
    values = [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    assert fold(values, 2) == {"a": 1, "b": 2, OTHER: 7}
    assert fold(values, 4) == {"a": 1, "b": 2, "c": 3, "d": 4}  # at the cap: nothing folded
    assert fold([], 3) == {}


def test_a_topic_named_other_adds_to_the_folded_rest():
    assert fold([("other", 5), ("a", 1)], 5) == {"a": 1, OTHER: 5}
    assert fold([("a", 1), ("b", 2), ("other", 5)], 1) == {"a": 1, OTHER: 7}


def test_batch_histogram_counts_as_one_observation_at_a_time_would():
    values = np.array([0.0, 0.005, 0.0051, 0.1, 2.0, 3600.0, 3600.5, -1.0])
    batch = BatchHistogram("late_seconds", "x", LATENESS_BUCKETS)
    batch.observe_many(values[:3])
    batch.observe_many(values[3:])
    batch.observe_many(np.array([]))
    reg = CollectorRegistry()
    one = Histogram("late_seconds", "x", buckets=LATENESS_BUCKETS, registry=reg)
    for v in values.tolist():
        one.observe(v)
    mine = CollectorRegistry()
    mine.register(batch)

    def samples(r: CollectorRegistry) -> dict[str, float]:
        lines = generate_latest(r).decode().splitlines()
        return {k: float(v) for k, v in (ln.rsplit(" ", 1) for ln in lines if not ln.startswith("#"))}

    mine_s, theirs = samples(mine), samples(reg)
    theirs.pop("late_seconds_created")
    assert mine_s.pop("late_seconds_sum") == pytest.approx(theirs.pop("late_seconds_sum"))
    assert mine_s == theirs
