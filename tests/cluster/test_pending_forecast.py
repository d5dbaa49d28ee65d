"""cluster/pending_forecast.py against a count made message by message."""

from __future__ import annotations

import random

import numpy as np
import pytest

from horologe.cluster import CANCEL, PRODUCE, SYNC, Entry, StateMachine
from horologe.cluster.committed_reads import pending_by_topic, watermark
from horologe.cluster.pending_forecast import forecast, pending_due
from horologe.storage import Message, Storage, StorageConfig
from horologe.storage.delay_index import MS_PER_HOUR, slot_ms
from horologe.wheel import Watermark

T = 1_767_225_600_000  # 2026-01-01 00:00 UTC
TOPICS = ("a", "b", "c")


def built(path, seed: int) -> StateMachine:
    """Messages over five hours (a hot second among them), some cancelled, and a watermark
    in the middle of the second hour: inside a second, between two local indexes."""
    rng = random.Random(seed)
    sm = StateMachine(Storage(str(path), StorageConfig(fsync=False)))
    hot = T + MS_PER_HOUR + 1_234_000 + 500
    times = [T + rng.randrange(5 * MS_PER_HOUR) for _ in range(3_000)] + [hot] * 400
    times += [hot - 400 + rng.randrange(900) for _ in range(300)]  # the hot second's other ms
    rng.shuffle(times)
    msgs = [Message(rng.choice(TOPICS), b"x", d, T) for d in times]
    res = sm.apply(1, Entry(PRODUCE, Watermark(T), T, msgs).encode())
    ids = [str(i) for i in res.ids]
    doomed = rng.sample(ids, 500)
    assert sm.apply(2, Entry(CANCEL, Watermark(T), T + 1, ids=doomed).encode()).error is None
    w = Watermark(hot, 150)  # 150 of the 400 at the hot ms delivered
    assert sm.apply(3, Entry(SYNC, w, hot + 2).encode()).delivered > 0
    return sm


def message_by_message(store, topic: str | None = None) -> np.ndarray:
    """The slot of every pending message (of ``topic``), from each one's index entry."""
    w = watermark(store)
    slots = []
    for hour in store.hours():
        b = store.bucket(hour)
        view = b.index_view()
        for gi, e in enumerate(view):
            if b.is_cancelled(gi) or (topic and store.topic_name(int(e["topic_id"])) != topic):
                continue
            slot = int(slot_ms(hour, e))
            if (slot, int(e["local_index"])) > (w.ms, w.local_index):
                slots.append(slot)
    return np.array(sorted(slots), dtype=np.int64)


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
