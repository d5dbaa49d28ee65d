"""The replicated state machine without Raft: deterministic, idempotent, never raises."""

from __future__ import annotations

import numpy as np

from horologe.cluster import (
    CANCEL,
    CANCELLED,
    DELIVERED,
    PRODUCE,
    SYNC,
    UNKNOWN,
    Entry,
    StateMachine,
    state_machine,
)
from horologe.cluster.committed_reads import counters, delivered_at, message_status, pending_by_topic
from horologe.storage import CorruptLogError, Message, MessageId, ReadyEntry, Storage, StorageConfig
from horologe.wheel import Watermark

from .same_files import assert_same_files

T = 1_767_225_600_000  # 2026-01-01 00:00 UTC


def machine(path) -> StateMachine:
    return StateMachine(Storage(str(path), StorageConfig(fsync=False)))


def produce(ws_ms: int, clock_ms: int, times: list[int], **kw) -> bytes:
    msgs = [Message("t", f"{d}".encode(), d, clock_ms, **kw) for d in times]
    return Entry(PRODUCE, Watermark(ws_ms), clock_ms, msgs).encode()


def sync(ws: Watermark, clock_ms: int) -> bytes:
    return Entry(SYNC, ws, clock_ms).encode()


def ready(sm: StateMachine) -> np.ndarray:
    return sm.store.read_ready("t")


def test_advance_delivers_in_order_with_the_entry_clock(tmp_path):
    sm = machine(tmp_path)
    res = sm.apply(1, produce(T, T, [T + 300, T + 100, T + 200, T + 5_000]))
    assert (
        res.error is None
        and len(res.ids) == 4
        and res.pending_slots.tolist() == [T + 300, T + 100, T + 200, T + 5_000]
    )
    assert sm.apply(2, sync(Watermark(T + 250), T + 251)).delivered == 2
    rows = ready(sm)
    assert rows["deliver_at_ms"].tolist() == [T + 100, T + 200]
    assert rows["delivered_at_ms"].tolist() == [T + 251, T + 251]
    assert sm.ws == Watermark(T + 250)


def test_replayed_and_stale_entries_change_nothing(tmp_path):
    sm = machine(tmp_path)
    sm.apply(1, produce(T, T, [T + 10]))
    sm.apply(2, sync(Watermark(T + 20), T + 20))
    assert sm.apply(2, sync(Watermark(T + 20), T + 20)).skipped
    assert sm.apply(3, sync(Watermark(T + 5), T + 30)).delivered == 0  # a stale ws never moves back
    assert sm.ws == Watermark(T + 20) and len(ready(sm)) == 1


def test_two_nodes_applying_the_same_entries_hold_the_same_bytes(tmp_path):
    entries = [
        produce(T, T, [T + k * 7 for k in range(50)], tags=("a",)),
        sync(Watermark(T + 100, 3), T + 101),
        produce(T + 100, T + 102, [T + 50, T + 400]),
        Entry(CANCEL, Watermark(T + 100), T + 103, ids=[]).encode(),
        sync(Watermark(T + 500), T + 500),
    ]
    a, b = machine(tmp_path / "a"), machine(tmp_path / "b")
    for i, e in enumerate(entries, 1):
        a.apply(i, e)
        b.apply(i, e)
    a.store.close()
    b.store.close()
    assert_same_files(tmp_path / "a", tmp_path / "b")


def test_late_arrival_behind_the_watermark(tmp_path):
    sm = machine(tmp_path)
    sm.apply(1, sync(Watermark(T + 1_000), T + 1_000))
    res = sm.apply(2, produce(T + 1_000, T + 1_001, [T + 500]))
    assert res.delivered == 1 and res.pending_slots.tolist() == []
    assert ready(sm)["delivered_at_ms"].tolist() == [T + 1_001]


def test_arrival_behind_a_watermark_ahead_of_the_clock_is_delivered_for_its_own_time(tmp_path):
    """The tick is ahead of this master's clock (it fires ahead by its lead, or a master
    whose clock ran fast left it there): a message behind it, not yet due by this clock,
    is delivered on arrival with its own deliver time, as deliver_at and as delivered_at;
    no pull hands it out before then (node/consumers/service.py)."""
    sm = machine(tmp_path)
    sm.apply(1, sync(Watermark(T + 10_000), T + 10_000))
    res = sm.apply(2, produce(T + 10_000, T + 1, [T + 3_000]))  # due at +3 s, this clock says +1 ms
    assert res.delivered == 1 and res.pending_slots.tolist() == []
    rows = ready(sm)
    assert rows["deliver_at_ms"].tolist() == rows["delivered_at_ms"].tolist() == [T + 3_000]


def test_cancel_states(tmp_path):
    sm = machine(tmp_path)
    ids = sm.apply(1, produce(T, T, [T + 10, T + 5_000], key=None)).ids
    sm.apply(2, sync(Watermark(T + 20), T + 20))
    res = sm.apply(
        3,
        Entry(
            CANCEL, Watermark(T + 20), T + 21, ids=[str(ids[0]), str(ids[1]), "0" * 16, "nonsense"]
        ).encode(),
    )
    assert res.cancels == [DELIVERED, CANCELLED, UNKNOWN, UNKNOWN]
    assert sm.apply(4, Entry(CANCEL, Watermark(T + 20), T + 22, ids=[str(ids[1])]).encode()).cancels == [
        CANCELLED
    ]
    sm.apply(5, sync(Watermark(T + 6_000), T + 6_000))
    assert len(ready(sm)) == 1  # the cancelled one was skipped
    assert message_status(sm.store, ids[1]).state == CANCELLED
    assert message_status(sm.store, ids[0]).delivered_at_ms == T + 20
    assert counters(sm.store) == {
        "stored": 2,
        "delivered": 1,
        "cancelled": 1,
        "rescheduled": 0,
        "late_dropped": 0,
        "late_dead_lettered": 0,
    }


def test_bad_entry_is_recorded_not_raised(tmp_path):
    sm = machine(tmp_path)
    res = sm.apply(1, b"\x93not an entry")
    assert res.error and sm.errors and sm.halted is None
    assert sm.apply(2, sync(Watermark(T), T)).error is None


def test_a_damaged_replica_halts_instead_of_skipping(tmp_path, monkeypatch):
    sm = machine(tmp_path)
    sm.apply(1, produce(T, T, [T + 1_000]))

    def damaged(*_args):
        raise CorruptLogError(str(tmp_path / "delay" / "x.log"), 40)

    monkeypatch.setattr(state_machine, "store_messages", damaged)
    res = sm.apply(2, produce(T, T, [T + 2_000]))
    assert sm.halted and "CorruptLogError" in sm.halted and res.error == sm.halted
    assert not sm.errors  # not recorded as a skipped entry: nothing moves on
    assert sm.store.applied_index == 1
    assert sm.apply(3, sync(Watermark(T), T)).error == sm.halted


def test_an_unforeseen_error_halts(tmp_path, monkeypatch):
    sm = machine(tmp_path)
    monkeypatch.setattr(state_machine, "store_messages", lambda *_a: 1 / 0)
    res = sm.apply(1, produce(T, T, [T + 1_000]))
    assert sm.halted and "ZeroDivisionError" in sm.halted and res.error == sm.halted
    assert sm.store.applied_index == 0


def test_a_replayed_index_of_another_term_halts(tmp_path):
    sm = machine(tmp_path)
    sm.apply(1, produce(T, T, [T + 1_000]), term=2)
    sm.apply(2, produce(T, T, [T + 2_000]), term=2)
    assert sm.apply(1, produce(T, T, [T + 1_000]), term=2).skipped  # an older index: skipped
    assert sm.apply(2, produce(T, T, [T + 2_000]), term=2).skipped and sm.halted is None
    res = sm.apply(2, produce(T, T, [T + 9_000]), term=3)  # the log after a power loss
    assert sm.halted and "term 2" in sm.halted and "term 3" in sm.halted and res.error


def test_delivered_at_is_found_by_bisection_despite_small_clock_regressions(tmp_path):
    sm = machine(tmp_path)
    n = 200_000
    delivered = T + np.arange(n, dtype=np.int64) * 10
    delivered[n // 2 :] -= 3_000  # a new master whose clock trails the last one's by 3 s
    rows = [ReadyEntry(5, k, 0, int(delivered[k]) - 50, int(delivered[k])) for k in range(n)]
    sm.store.apply(1, lambda tx: tx.append_ready("t", rows))
    for k in (0, 1, n // 2 - 1, n // 2, n // 2 + 1, n - 1):
        assert delivered_at(sm.store, "t", MessageId(5, k), int(delivered[k]) - 50) == int(delivered[k])
    assert delivered_at(sm.store, "t", MessageId(6, 0), T) is None


def test_pending_by_topic_follows_stores_cancels_and_deliveries(tmp_path):
    sm = machine(tmp_path)
    w, at = Watermark(T + 1000), [("a", T + 1010), ("b", T + 1020), ("a", T + 1030), ("a", T + 995)]
    msgs = [Message(topic, b"x", d, T + 1000) for topic, d in at]
    res = sm.apply(1, Entry(PRODUCE, w, T + 1000, msgs).encode())  # the last one is due at once
    assert res.error is None and pending_by_topic(sm.store) == {"a": 2, "b": 1}
    sm.apply(2, Entry(CANCEL, w, T + 1001, ids=[str(res.ids[2])]).encode())
    assert pending_by_topic(sm.store) == {"a": 1, "b": 1}
    sm.apply(3, sync(Watermark(T + 1015), T + 1015))
    assert pending_by_topic(sm.store) == {"a": 0, "b": 1}
    sm.apply(4, sync(Watermark(T + 1100), T + 1100))
    c = counters(sm.store)
    assert pending_by_topic(sm.store) == {"a": 0, "b": 0}
    assert c["stored"] - c["delivered"] - c["cancelled"] == 0
