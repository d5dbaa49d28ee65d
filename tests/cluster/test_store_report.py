"""``storage_report``: what ``horologe storage inspect`` prints, reckoned from a store."""

from __future__ import annotations

import os

from horologe.cluster import ACK, PRODUCE, SYNC, TRIM, Entry, StateMachine
from horologe.cluster.retention import plan
from horologe.cluster.store_report import TopicLog, disk_used, storage_report
from horologe.storage import Message, Storage, StorageConfig
from horologe.storage.key_index import KEY_ENTRY
from horologe.wheel import Watermark

H0 = 491_000 * 3_600_000
HOUR = 3_600_000
DAY = 24 * HOUR


def machine(path) -> StateMachine:
    return StateMachine(Storage(str(path), StorageConfig(fsync=False)))


def delivered_and_acked(path) -> None:
    """50 keyed messages of hour H0 delivered and acked by g; 5 of hour H0 + 3 h pending."""
    sm = machine(path)
    msgs = [Message("orders", b"x" * 1000, H0 + 1 + k, H0, key=f"k{k}") for k in range(50)]
    msgs += [Message("audit", b"y", H0 + 3 * HOUR, H0, key=f"a{k}") for k in range(5)]
    sm.apply(1, Entry(PRODUCE, Watermark(H0), H0, msgs).encode())
    sm.apply(2, Entry(SYNC, Watermark(H0 + 2 * HOUR), H0 + 2 * HOUR).encode())
    sm.apply(3, Entry(ACK, Watermark(H0 + 2 * HOUR), H0, acks=[("g", "orders", 0, 50)]).encode())
    sm.store.close()


def test_a_store_before_any_cut(tmp_path):
    delivered_and_acked(tmp_path)
    with Storage(str(tmp_path)) as store:
        r = storage_report(store, None, 7 * DAY)
    assert r.applied_index == 3 and r.retained_from_hour == 0
    assert r.now_ms == H0 + 2 * HOUR  # the watermark, when no time is given
    assert r.reclaim.total == 0 and r.reclaim.hours == 0 and r.reclaim.segments == 0
    assert (r.live_keys, r.dead_keys, r.dead_key_bytes) == (55, 0, 0)
    assert r.topics == [TopicLog("orders", 0, 0, 50), TopicLog("audit", 1, 0, 0)]
    assert r.hours == [(H0 // HOUR, 50), (H0 // HOUR + 3, 5)]
    assert {"journal", "delay", "ready", "keys"} <= set(r.disk_used)
    assert r.disk_total == sum(r.disk_used.values())


def test_what_a_cut_would_reclaim_and_what_it_leaves(tmp_path):
    delivered_and_acked(tmp_path)
    now = H0 + 26 * HOUR
    with Storage(str(tmp_path)) as store:
        r = storage_report(store, now, DAY)
        cut = plan(store, now, DAY)
    assert r.now_ms == now
    assert (r.reclaim.hours, r.reclaim.segments) == (1, 1)
    assert r.reclaim.total == r.reclaim.hour_bytes + r.reclaim.ready_bytes > 0
    assert r.reclaim.hour_bytes < r.disk_used["delay"] and r.reclaim.ready_bytes <= r.disk_used["ready"]

    sm = machine(tmp_path)
    sm.apply(4, Entry(TRIM, Watermark(now), now, hour=cut.hour, ready=sorted(cut.ready.items())).encode())
    sm.store.close()
    with Storage(str(tmp_path)) as store:
        after = storage_report(store, now, DAY)
    assert after.retained_from_hour == cut.hour and after.reclaim.total == 0
    assert after.hours == [(H0 // HOUR + 3, 5)]
    assert after.topics[0] == TopicLog("orders", 0, 50, 50)  # every delivered entry trimmed
    # the 50 keys of the removed hour are dead until cleaning passes them
    assert after.live_keys == 5 and after.dead_keys == 50
    assert after.dead_key_bytes == 50 * KEY_ENTRY.size


def test_disk_used_counts_the_root_files_as_the_journal(tmp_path):
    (tmp_path / "commits.log").write_bytes(b"x" * 10)
    os.makedirs(tmp_path / "delay" / "deeper")
    (tmp_path / "delay" / "a.log").write_bytes(b"x" * 100)
    (tmp_path / "delay" / "deeper" / "b").write_bytes(b"x" * 7)
    (tmp_path / "ready").mkdir()
    assert disk_used(str(tmp_path)) == {"journal": 10, "delay": 107}
