"""A store with pending messages over five hours, some cancelled, some delivered, and the
pending ones counted message by message: for tests of forecasts and pending lists."""

from __future__ import annotations

import random

import numpy as np

from horologe.cluster import CANCEL, PRODUCE, SYNC, Entry, StateMachine
from horologe.cluster.committed_reads import watermark
from horologe.storage import Message, MessageId, Storage, StorageConfig
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
    return np.array(sorted(s for s, _, _ in pending_keys(store, topic)), dtype=np.int64)


def pending_keys(store, topic: str | None = None) -> list[tuple[int, int, str]]:
    """(slot, local index, id) of every pending message (of ``topic``), in key order."""
    w = watermark(store)
    keys = []
    for hour in store.hours():
        b = store.bucket(hour)
        view = b.index_view()
        for gi, e in enumerate(view):
            if b.is_cancelled(gi) or (topic and store.topic_name(int(e["topic_id"])) != topic):
                continue
            slot = int(slot_ms(hour, e))
            if (slot, int(e["local_index"])) > (w.ms, w.local_index):
                keys.append((slot, int(e["local_index"]), str(MessageId(hour, gi))))
    return sorted(keys)
