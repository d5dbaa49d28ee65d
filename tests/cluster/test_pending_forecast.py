"""cluster/pending_forecast.py against a count made message by message."""

from __future__ import annotations

import numpy as np
import pytest

from horologe.cluster.committed_reads import pending_by_topic
from horologe.cluster.pending_forecast import forecast, pending_due
from horologe.storage import Storage, StorageConfig
from horologe.storage.delay_index import MS_PER_HOUR

from .pending_store import TOPICS, T, built, message_by_message


@pytest.mark.parametrize("seed", [1, 2])
def test_forecast_counts_what_each_message_says(tmp_path, seed):
    sm = built(tmp_path, seed)
    store = sm.store
    for topic in (None, *TOPICS, "never-used"):
        slots = message_by_message(store, topic) if topic != "never-used" else np.zeros(0, np.int64)
        for start, bucket, n in (
            (T, 1000, 5 * 3600),
            (T, 60_000, 5 * 60),
            (T + 30 * 60_000, 60_000, 7),  # from the middle of the first hour: the rest is "before"
            (T, MS_PER_HOUR, 5),
            (T - MS_PER_HOUR, 86_400_000, 1),
            (T + 2 * MS_PER_HOUR, MS_PER_HOUR, 2),
        ):
            f = forecast(store, start, n, bucket, topic)
            seconds = slots - slots % 1000
            inside = (seconds >= start) & (seconds < start + n * bucket)
            want = np.bincount((seconds[inside] - start) // bucket, minlength=n)
            assert f.counts.tolist() == want.tolist(), (topic, start, bucket)
            assert f.before == int((seconds < start).sum()), (topic, start, bucket)
    total = forecast(store, T, 1, 86_400_000)
    assert total.before + int(total.counts.sum()) == sum(pending_by_topic(store).values())


def test_pending_due_counts_overdue_and_each_horizon(tmp_path):
    sm = built(tmp_path, 3)
    slots = message_by_message(sm.store)
    now = T + 2 * MS_PER_HOUR + 17_250  # well past the watermark: some are overdue
    got = pending_due(sm.store, now, (60_000, MS_PER_HOUR, 86_400_000))
    assert got == [int((slots - slots % 1000 < now + h).sum()) for h in (60_000, MS_PER_HOUR, 86_400_000)]
    assert got[2] == len(slots)


def test_a_census_leaves_nothing_cached(tmp_path):
    sm = built(tmp_path, 4)
    store = sm.store
    store.close()
    reopened = Storage(store.directory, StorageConfig(fsync=False))
    before = reopened.mapped_hours(), len(reopened._buckets)
    forecast(reopened, T, 5 * 60, 60_000)
    assert (reopened.mapped_hours(), len(reopened._buckets)) == before
