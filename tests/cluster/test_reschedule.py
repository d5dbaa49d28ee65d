"""Reschedules through the state machine, on real storage: a moved message fires once, at
its new time, under the id it was given, however often it moves; keys, cancels, status,
retention and replicas follow it."""

from __future__ import annotations

import msgpack

from horologe.cluster import CANCEL, CANCELLED, DELIVERED, PRODUCE, SCHEDULED, SYNC, TRIM, UNKNOWN, Entry
from horologe.cluster.committed_reads import counters, message_status, pending_by_topic
from horologe.cluster.consumer_groups import ID_HEADER
from horologe.cluster.entries import MOVE
from horologe.storage import Message, MessageId, StorageConfig
from horologe.storage.delay_index import MS_PER_HOUR
from horologe.wheel import Watermark

from .test_retention import DAY_MS, Replicas

T = 1_767_225_600_000  # 2026-01-01 00:00 UTC
LATE_NONE = {"late_dropped": 0, "late_dead_lettered": 0}
H = T // MS_PER_HOUR


def produce(ws: int, msgs: list[Message]) -> bytes:
    return Entry(PRODUCE, Watermark(ws), ws, msgs).encode()


def sync(ws: int) -> bytes:
    return Entry(SYNC, Watermark(ws), ws).encode()


def move(ws: int, ids=(), keys=(), at=()) -> bytes:
    return Entry(MOVE, Watermark(ws), ws, ids=list(ids), keys=list(keys), deliver_at=list(at)).encode()


def fired(r: Replicas, topic: str = "t") -> list[tuple[str, bytes, int]]:
    """(id it answers to, body, slot) of each delivered message, in delivery order."""
    rows = r.store.read_ready(topic)
    mids = [MessageId(int(h), int(g)) for h, g in rows[["hour", "global_index"]].tolist()]
    out = []
    for rec, row in zip(r.store.read_records(mids), rows, strict=True):
        rec = msgpack.unpackb(rec, raw=False)
        out.append((rec["headers"].get(ID_HEADER, rec["id"]), rec["body"], int(row["deliver_at_ms"])))
    return out


def test_a_moved_message_fires_once_at_its_new_time_under_its_id(tmp_path):
    r = Replicas(tmp_path)
    a, b = r.apply(produce(T, [Message("t", b"a", T + 10_000, T), Message("t", b"b", T + 20_000, T)])).ids
    res = r.apply(move(T + 1, [str(a)], at=[T + 30_000]))
    assert (
        res.cancels == [SCHEDULED]
        and res.cancel_ids == [str(a)]
        and res.pending_slots.tolist() == [T + 30_000]
    )
    r.apply(sync(T + 25_000))
    assert fired(r) == [(str(b), b"b", T + 20_000)]  # never at the old time
    assert message_status(r.store, a).state == SCHEDULED
    assert message_status(r.store, a).deliver_at_ms == T + 30_000
    r.apply(sync(T + 35_000))
    assert fired(r) == [(str(b), b"b", T + 20_000), (str(a), b"a", T + 30_000)]
    st = message_status(r.store, a)
    assert (st.id, st.state, st.delivered_at_ms) == (a, DELIVERED, T + 35_000)
    assert counters(r.store) == {"stored": 2, "delivered": 2, "cancelled": 0, "rescheduled": 1} | LATE_NONE
    assert pending_by_topic(r.store) == {"t": 0}
    r.close_and_compare()


def test_many_moves_across_hours_keys_and_a_cancel_follow_the_id(tmp_path):
    r = Replicas(tmp_path)
    (a,) = r.apply(produce(T, [Message("t", b"a", T + 60_000, T, key="order-1")])).ids
    for k, at in enumerate([T + 3 * MS_PER_HOUR, T + 30 * 60_000, T + 5 * MS_PER_HOUR + 7]):
        res = r.apply(move(T + k, keys=[("t", "order-1")], at=[at]))
        assert res.cancels == [SCHEDULED] and res.cancel_ids == [str(a)]
    assert message_status(r.store, a).deliver_at_ms == T + 5 * MS_PER_HOUR + 7
    # producing the same key again answers the id the message was given
    assert r.apply(produce(T + 5, [Message("t", b"again", T + 1, T + 5, key="order-1")])).ids == [a]
    r.apply(sync(T + 4 * MS_PER_HOUR))
    assert fired(r) == []  # none of the old times fired
    res = r.apply(Entry(CANCEL, Watermark(T + 4 * MS_PER_HOUR), T + 4 * MS_PER_HOUR, ids=[str(a)]).encode())
    assert res.cancels == [CANCELLED] and res.cancel_ids == [str(a)]
    r.apply(sync(T + 6 * MS_PER_HOUR))
    assert fired(r) == [] and message_status(r.store, a).state == CANCELLED
    assert pending_by_topic(r.store) == {"t": 0}
    r.close_and_compare()


def test_states_a_move_answers(tmp_path):
    r = Replicas(tmp_path)
    a, b, c = r.apply(produce(T, [Message("t", b"x", T + k * 1000, T) for k in (1, 50, 60)])).ids
    r.apply(Entry(CANCEL, Watermark(T), T, ids=[str(c)]).encode())
    r.apply(sync(T + 2_000))
    res = r.apply(move(T + 2_000, [str(a), str(c), "0" * 16, "nonsense"], [("t", "nokey")], [T + 9_000] * 5))
    assert res.cancels == [DELIVERED, CANCELLED, UNKNOWN, UNKNOWN, UNKNOWN]
    assert counters(r.store)["rescheduled"] == 0
    # the same message twice in one entry: it moves once, to the last time asked
    res = r.apply(move(T + 2_000, [str(b), str(b)], at=[T + 70_000, T + 80_000]))
    assert res.cancels == [SCHEDULED, SCHEDULED]
    r.apply(sync(T + 100_000))
    assert fired(r) == [(str(a), b"x", T + 1000), (str(b), b"x", T + 80_000)]
    r.close_and_compare()


def test_a_move_into_the_past_delivers_at_once(tmp_path):
    r = Replicas(tmp_path)
    (a,) = r.apply(produce(T, [Message("t", b"a", T + DAY_MS, T)])).ids
    r.apply(sync(T + 10_000))
    res = r.apply(move(T + 10_000, [str(a)], at=[T + 5]))
    assert res.delivered == 1 and res.pending_slots.tolist() == []
    assert [i for i, _, _ in fired(r)] == [str(a)]
    assert message_status(r.store, a).state == DELIVERED and pending_by_topic(r.store) == {"t": 0}
    r.apply(sync(T + 2 * DAY_MS))
    assert len(fired(r)) == 1  # the old place stays silent
    r.close_and_compare()


def test_the_link_outlives_its_hour_until_the_copy_goes(tmp_path):
    cfg = StorageConfig(fsync=False)
    r = Replicas(tmp_path, cfg)
    a, b = r.apply(produce(T, [Message("t", b"a", T + 60_000, T), Message("t", b"b", T + 61_000, T)])).ids
    r.apply(move(T, [str(a)], at=[T + 5 * MS_PER_HOUR]))
    now = T + 3 * MS_PER_HOUR
    r.apply(sync(now))  # b delivered, hour H sealed
    r.apply(Entry(TRIM, Watermark(now), now, hour=H + 2, ready=[("t", 1)]).encode())
    assert H not in r.store.hours() and r.store.file_lengths().get(f"delay/{_name(H)}.move")
    assert message_status(r.store, a).state == SCHEDULED  # found through the kept link
    r.apply(sync(T + 7 * MS_PER_HOUR))
    assert [i for i, _, _ in fired(r)][-1:] == [str(a)]  # (b's entry went with the cut)
    now = T + 7 * MS_PER_HOUR
    r.apply(Entry(TRIM, Watermark(now), now, hour=H + 6, ready=[("t", 2)]).encode())
    assert not any(
        rel.endswith(".move") for rel in r.store.file_lengths()
    )  # the copy's hour went: so did the links
    r.close_and_compare()


def _name(hour: int) -> str:
    from horologe.storage.hour_names import hour_name

    return hour_name(hour)


def test_a_batch_of_moves_across_hours_fires_each_once_at_its_last_time(tmp_path):
    """One entry moves 300 messages of 6 hours (their places read, tombstoned and linked
    hour by hour), some named twice, by id and by key, and one by its copy's own place."""
    r = Replicas(tmp_path)
    msgs = [Message("t", b"%d" % k, T + (k % 6) * MS_PER_HOUR + 1000 + k, T, key=f"k{k}") for k in range(300)]
    ids = r.apply(produce(T, msgs)).ids
    (first,) = r.apply(move(T, [str(ids[0])], at=[T + 7 * MS_PER_HOUR])).ids  # its copy's place
    new_at = {k: T + 8 * MS_PER_HOUR + (k * 7919) % MS_PER_HOUR for k in range(300)}
    twice = {k: new_at[k] + 1 for k in range(1, 300, 10)}  # named again, by key: the last wins
    res = r.apply(
        move(
            T + 1,
            [str(ids[k]) for k in range(300)] + [str(first)],
            [("t", f"k{k}") for k in twice],
            [new_at[k] for k in range(300)] + [T + 9 * MS_PER_HOUR] + list(twice.values()),
        )
    )
    assert res.cancels == [SCHEDULED] * (301 + len(twice))
    # the copy's place answers for the id it is a copy of
    assert res.cancel_ids == [str(i) for i in ids] + [str(ids[0])] + [str(ids[k]) for k in twice]
    assert counters(r.store)["rescheduled"] == 1 + 300
    r.apply(sync(T + 8 * MS_PER_HOUR - 1))
    assert fired(r) == []  # neither the first places nor the first copy fired
    r.apply(sync(T + 10 * MS_PER_HOUR))
    want = {str(ids[k]): twice.get(k, new_at[k]) for k in range(300)}
    want[str(ids[0])] = T + 9 * MS_PER_HOUR  # named by its copy's place after its own id
    got = fired(r)
    assert len(got) == 300 and {i: at for i, _, at in got} == want
    assert all(message_status(r.store, ids[k]).deliver_at_ms == want[str(ids[k])] for k in range(300))
    r.close_and_compare()


def test_a_key_whose_message_moved_earlier_lives_as_long_as_the_new_time_s_hour(tmp_path):
    """A key lives 24 h past its message's delivery hour: for a message moved earlier that
    is the hour it moved to, not the one it was first due in; a produce with the key past
    that stores a new message (the entry the first hour's key left must not answer)."""
    r = Replicas(tmp_path, StorageConfig(fsync=False))
    (a,) = r.apply(produce(T, [Message("t", b"a", T + 10 * MS_PER_HOUR, T, key="k")])).ids
    r.apply(move(T + 1, keys=[("t", "k")], at=[T + 60_000]))
    r.apply(sync(T + 2 * 60_000))
    assert [i for i, _, _ in fired(r)] == [str(a)]
    then = T + 20 * MS_PER_HOUR
    r.apply(sync(then))  # within 24 h of the hour it was delivered in
    assert r.apply(produce(then, [Message("t", b"b", then + 60_000, then, key="k")])).ids == [a]
    now = T + 26 * MS_PER_HOUR
    r.apply(sync(now))  # past 24 h after it: the key is free, the first hour's entry live still
    (b,) = r.apply(produce(now, [Message("t", b"b", now + 60_000, now, key="k")])).ids
    assert b != a and message_status(r.store, b).state == SCHEDULED
    r.apply(sync(now + 2 * 60_000))
    assert [i for i, _, _ in fired(r)] == [str(a), str(b)]
    r.close_and_compare()
