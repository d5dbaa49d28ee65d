"""Retention and keys through the state machine, on real storage: the cut waits for every
group, replicas hold the same bytes, offsets stay put, a 30-day key cancels."""

from __future__ import annotations

import numpy as np
import pytest

from horologe.cluster import ACK, CANCEL, CANCELLED, PRODUCE, RETRY, SYNC, TRIM, UNKNOWN, Entry, StateMachine
from horologe.cluster.committed_reads import group_progress, message_status
from horologe.cluster.retention import plan, reclaimable
from horologe.storage import (
    Message,
    MessageExpiredError,
    ReadyTrimmedError,
    Storage,
    StorageConfig,
    check_store,
)
from horologe.storage.delay_index import MS_PER_HOUR
from horologe.wheel import Watermark

from ..storage.helpers import replica_state

T = 1_767_225_600_000  # 2026-01-01 00:00 UTC
H = T // MS_PER_HOUR
DAY_MS = 86_400_000
# Few key buckets: each store saves and loads its heads as it closes and opens (32 MiB of
# them at the default), and the third replica reopens every seventh entry.
CFG = StorageConfig(fsync=False, ready_segment_entries=4, key_buckets=1 << 12)


def machine(path, cfg: StorageConfig = CFG) -> StateMachine:
    return StateMachine(Storage(str(path), cfg))


def produce(ws: int, clock: int, msgs: list[Message]) -> bytes:
    return Entry(PRODUCE, Watermark(ws), clock, msgs).encode()


def sync(ws: int) -> bytes:
    return Entry(SYNC, Watermark(ws), ws).encode()


def ack(ws: int, group: str, offsets) -> bytes:
    return Entry(ACK, Watermark(ws), ws, acks=[(group, "t", o, o + 1) for o in offsets]).encode()


def trim(ws: int, hour: int, offset: int) -> bytes:
    return Entry(TRIM, Watermark(ws), ws, hour=hour, ready=[("t", offset)]).encode()


class Replicas:
    """Three state machines fed the same entries; the third reopens its store now and then."""

    def __init__(self, root, cfg: StorageConfig = CFG) -> None:
        self.root, self.cfg = root, cfg
        self.sms = [machine(root / n, cfg) for n in ("a", "b", "c")]
        self.ri = 0

    def apply(self, blob: bytes):
        self.ri += 1
        results = [sm.apply(self.ri, blob) for sm in self.sms]
        assert all(r.error is None for r in results), results[0].error
        if self.ri % 7 == 0:
            self.sms[2].store.close()
            self.sms[2] = machine(self.root / "c", self.cfg)
        return results[0]

    @property
    def store(self) -> Storage:
        return self.sms[0].store

    def close_and_compare(self) -> None:
        for sm in self.sms:
            check_store(sm.store)
            sm.store.close()
        states = [replica_state(str(self.root / n)) for n in ("a", "b", "c")]
        assert states[0] == states[1] == states[2]


def test_a_cut_waits_for_every_group_and_replicas_cut_the_same_bytes(tmp_path):
    r = Replicas(tmp_path)
    msgs = [Message("t", f"{k}".encode(), T + 1000 + k, T, key=f"k{k}") for k in range(10)]
    ids = r.apply(produce(T, T, msgs)).ids
    assert r.apply(sync(T + 2 * MS_PER_HOUR)).delivered == 10  # hour H sealed
    r.apply(ack(T + 2 * MS_PER_HOUR, "g1", range(10)))
    r.apply(ack(T + 2 * MS_PER_HOUR, "g2", range(5)))
    before = r.store.read_ready("t")

    # g2 has passed offset 5 only: the segment [0, 4) goes, hour H stays (the rest names it)
    res = r.apply(trim(T + 2 * MS_PER_HOUR, H + 1, 10))
    assert res.retained_from_hour == H
    assert r.store.ready_base("t") == 4 and r.store.ready_count("t") == 10
    assert np.array_equal(r.store.read_ready("t"), before[4:])
    with pytest.raises(ReadyTrimmedError):
        r.store.read_ready("t", 0, 4)
    assert r.store.hours() == [H]
    assert r.store.lookup_key("t", "k0") == ids[0]

    r.apply(ack(T + 2 * MS_PER_HOUR, "g2", range(5, 10)))
    res = r.apply(trim(T + 2 * MS_PER_HOUR, H + 1, 10))
    assert res.retained_from_hour == H + 1
    assert r.store.ready_base("t") == 10 and r.store.hours() == []
    with pytest.raises(MessageExpiredError):
        message_status(r.store, ids[0])
    # the keys went with their hour: a cancel by key finds nothing, a produce stores anew
    cancel = Entry(CANCEL, Watermark(T + 2 * MS_PER_HOUR), T, keys=[("t", "k3")]).encode()
    assert r.apply(cancel).cancels == [UNKNOWN]

    # offsets go on where they were; a group that never acked starts at the base
    late = [Message("t", b"late", T + 2 * MS_PER_HOUR, T + 2 * MS_PER_HOUR, key="k3")]
    again = r.apply(produce(T + 2 * MS_PER_HOUR, T + 2 * MS_PER_HOUR, late))
    assert again.ids[0] != ids[3] and again.delivered == 1
    assert r.store.ready_count("t") == 11
    assert r.store.read_ready("t")["global_index"].tolist() == [again.ids[0].global_index]
    r.apply(ack(T + 2 * MS_PER_HOUR, "g3", [10]))
    assert group_progress(r.store, "g3", "t").committed == 11
    r.close_and_compare()


def delivered(path, n: int, acked: int) -> StateMachine:
    """A machine with ``n`` messages of hour H delivered, the first ``acked`` acked by group g."""
    sm = machine(path)
    sm.apply(1, produce(T, T, [Message("t", b"x", T + 1 + k, T) for k in range(n)]))
    sm.apply(2, sync(T + 2 * MS_PER_HOUR))
    sm.apply(3, ack(T + 2 * MS_PER_HOUR, "g", range(acked)))
    return sm


def test_the_master_plans_by_its_clock_and_the_apply_clamps(tmp_path):
    sm = delivered(tmp_path / "s", 6, 6)
    store = sm.store
    # not yet older than the retention by the clock given
    assert plan(store, T + 2 * MS_PER_HOUR, DAY_MS) is None
    cut = plan(store, T + 2 * MS_PER_HOUR + DAY_MS, DAY_MS)
    assert cut.ready == {"t": 6} and cut.hour == H + 1
    gone = reclaimable(store, cut)
    assert gone.hours == 1 and gone.segments == 2 and gone.total > 0
    # a stale plan that asks for more than the groups passed is clamped by every node
    now = T + 2 * MS_PER_HOUR
    assert sm.apply(4, produce(now, now, [Message("t", b"y", now, T)])).delivered == 1  # offset 6
    sm.apply(5, trim(now, H + 5, 100))
    assert store.ready_base("t") == 4  # the segment [4, 7) holds offset 6, which g has not passed
    assert store.hours() == [H, H + 2]  # and its offsets 4 and 5 still name hour H
    check_store(store)
    store.close()


def test_a_nack_of_a_trimmed_offset_is_skipped(tmp_path):
    sm = delivered(tmp_path / "s", 5, 4)
    sm.apply(4, trim(T + 2 * MS_PER_HOUR, H, 4))
    retry = Entry(RETRY, Watermark(T + 2 * MS_PER_HOUR), T, retries=[("other", "t", 1, T + 3 * MS_PER_HOUR)])
    res = sm.apply(5, retry.encode())
    assert res.error is None and res.ids == [] and sm.store.ready_count("%RETRY%other") == 0
    check_store(sm.store)
    sm.store.close()


def test_cancel_by_key_thirty_days_later(tmp_path):
    """Keyed traffic every hour for 29 days, the key index cleaning as it goes; then the
    30-day message is cancelled by its key and never delivered."""
    cfg = StorageConfig(fsync=False, key_buckets=1 << 12, key_segment_entries=256, key_clean_slack=0)
    r = Replicas(tmp_path, cfg)
    far = Message("t", b"renew", T + 30 * DAY_MS, T, key="subscription-42")
    (mid,) = r.apply(produce(T, T, [far])).ids
    for h in range(1, 29 * 24):
        now = T + h * MS_PER_HOUR  # the advance to now delivers the hour before
        r.apply(
            produce(now, now, [Message("t", b"x", now + 60_000 + k, now, key=f"{h}/{k}") for k in range(3)])
        )
    assert r.store.key_index.cursor > 0  # cleaned: dead keys of the past days dropped
    now = T + 29 * DAY_MS
    res = r.apply(Entry(CANCEL, Watermark(now), now, keys=[("t", "subscription-42")]).encode())
    assert res.cancels == [CANCELLED] and res.cancel_ids == [str(mid)]
    r.apply(sync(T + 31 * DAY_MS))
    delivered = r.store.read_ready("t")[["hour", "global_index"]].tolist()
    assert len(delivered) == (29 * 24 - 1) * 3 and (mid.hour, mid.global_index) not in delivered
    r.close_and_compare()


def test_a_snapshot_after_a_cut_installs_and_follows_the_log(tmp_path):
    sm = machine(tmp_path / "a")
    entries = [
        produce(T, T, [Message("t", f"{k}".encode(), T + 1 + k, T, key=f"k{k}") for k in range(9)]),
        sync(T + 2 * MS_PER_HOUR),
        ack(T + 2 * MS_PER_HOUR, "g", range(8)),
        trim(T + 2 * MS_PER_HOUR, H + 1, 9),
    ]
    for i, e in enumerate(entries, 1):
        sm.apply(i, e)
    assert sm.store.ready_base("t") == 8
    sm.store.snapshot(str(tmp_path / "snap"))
    later = [
        produce(
            T + 2 * MS_PER_HOUR, T + 2 * MS_PER_HOUR, [Message("t", b"n", T + 3 * MS_PER_HOUR, T, key="new")]
        ),
        sync(T + 4 * MS_PER_HOUR),
        ack(T + 4 * MS_PER_HOUR, "g", [8, 9]),
        trim(T + 4 * MS_PER_HOUR, H + 3, 10),
    ]
    other = machine(tmp_path / "b")
    other.apply(1, entries[0])  # something to replace
    other.store.restore(str(tmp_path / "snap"))
    for i, e in enumerate(later, len(entries) + 1):
        assert sm.apply(i, e).error is None
        assert other.apply(i, e).error is None
    for s in (sm.store, other.store):
        assert s.ready_base("t") == 10 and s.hours() == [H + 3]
        check_store(s)
    assert sm.store.read_message(other.store.lookup_key("t", "new")).message.body == b"n"
    assert other.store.lookup_key("t", "k8") is None  # its hour went


def test_a_groups_retries_wait_for_it_before_it_ever_read_one(tmp_path):
    """A retry topic has one reader, the group it belongs to, which has no progress on it
    until it acks its first retry: the master plans no trim of retries the group has not
    passed, however long they wait (the simulator with ``--retention --push``: a push
    group's first retry trimmed unread, 300 ms after it fell due)."""
    sm = delivered(tmp_path / "s", 3, 2)
    now = T + 2 * MS_PER_HOUR
    retry = Entry(RETRY, Watermark(now), now, retries=[("g", "t", 2, now + 10)])
    assert len(sm.apply(4, retry.encode()).ids) == 1
    sm.apply(5, sync(now + 1000))
    assert sm.store.ready_count("%RETRY%g") == 1
    cut = plan(sm.store, now + 1000 + DAY_MS, DAY_MS)
    assert cut.ready == {"t": 3}  # the topic, which g passed; not its retry, unread
    assert cut.hour == H + 2  # whose hour the retry names
    sm.store.close()
