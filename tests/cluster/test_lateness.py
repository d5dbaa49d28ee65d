"""Lateness policies through the state machine, on real storage: a message that falls due
later than its max_lateness is dropped or dead-lettered as it asked, on every replica
alike; the others are delivered, and every one says how late it was."""

from __future__ import annotations

from horologe.cluster import ACK, DELIVERED, PRODUCE, RETRY, SYNC, Entry
from horologe.cluster.committed_reads import (
    DEAD_LETTERED,
    DROPPED,
    counters,
    message_status,
    pending_by_topic,
)
from horologe.cluster.entries import MOVE
from horologe.storage import Message, MessageId
from horologe.storage.late_policies import policy_headers
from horologe.wheel import Watermark

from .test_retention import Replicas

T = 1_767_225_600_000  # 2026-01-01 00:00 UTC


def msg(body: str, at: int, clock: int = T, **policy) -> Message:
    headers = policy_headers(policy["max_ms"], policy["on_late"]) if policy else {}
    return Message("t", body.encode(), at, clock, headers=headers)


def produce(ws: int, clock: int, msgs: list[Message]) -> bytes:
    return Entry(PRODUCE, Watermark(ws), clock, msgs).encode()


def sync(ws: int, clock: int | None = None) -> bytes:
    return Entry(SYNC, Watermark(ws), ws if clock is None else clock).encode()


def delivered(r: Replicas, topic: str = "t") -> list[MessageId]:
    rows = r.store.read_ready(topic)
    return [MessageId(int(h), int(g)) for h, g in rows[["hour", "global_index"]].tolist()]


def test_late_messages_follow_their_policy(tmp_path):
    r = Replicas(tmp_path)
    r.apply(Entry(ACK, Watermark(T), T, acks=[("g", "t", 0, 0)]).encode())  # g reads t
    drop, dlq, late_ok, plain, in_time = r.apply(
        produce(
            T,
            T,
            [
                msg("drop", T + 1_000, max_ms=1_000, on_late="drop"),
                msg("dlq", T + 1_000, max_ms=1_000, on_late="dlq"),
                msg("deliver", T + 1_000, max_ms=1_000, on_late="deliver"),
                msg("plain", T + 1_000),
                msg("in time", T + 4_000, max_ms=1_000, on_late="drop"),
            ],
        )
    ).ids
    r.apply(sync(T + 3_500))  # the first four fall due 2.5 s late, the last is not due
    r.apply(sync(T + 4_500))  # the last 0.5 s late: within its allowance
    assert delivered(r) == [late_ok, plain, in_time]
    assert delivered(r, "%DLQ%g") == [dlq]
    for mid, state, late_by in (
        (drop, DROPPED, 2_500),
        (dlq, DEAD_LETTERED, 2_500),
        (late_ok, DELIVERED, 2_500),
        (plain, DELIVERED, 2_500),
        (in_time, DELIVERED, 500),
    ):
        st = message_status(r.store, mid)
        assert (st.state, st.late_by_ms) == (state, late_by), mid
    c = counters(r.store)
    assert (c["stored"], c["delivered"], c["late_dropped"], c["late_dead_lettered"]) == (5, 3, 1, 1)
    assert pending_by_topic(r.store) == {"t": 0}
    r.close_and_compare()


def test_a_message_past_its_allowance_on_arrival_is_handled_at_once(tmp_path):
    r = Replicas(tmp_path)
    r.apply(sync(T))
    old, fresh = r.apply(
        produce(
            T,
            T,
            [
                msg("old", T - 60_000, max_ms=5_000, on_late="drop"),
                msg("fresh", T - 1_000, max_ms=5_000, on_late="drop"),
            ],
        )
    ).ids
    assert delivered(r) == [fresh]
    assert message_status(r.store, old).state == DROPPED
    assert message_status(r.store, old).late_by_ms == 60_000
    assert pending_by_topic(r.store).get("t", 0) == 0 and counters(r.store)["late_dropped"] == 1
    r.close_and_compare()


def test_a_rescheduled_copy_keeps_its_policy(tmp_path):
    r = Replicas(tmp_path)
    (a,) = r.apply(produce(T, T, [msg("a", T + 1_000, max_ms=1_000, on_late="drop")])).ids
    r.apply(Entry(MOVE, Watermark(T), T, ids=[str(a)], deliver_at=[T + 10_000]).encode())
    r.apply(sync(T + 30_000))  # 20 s late at its new time
    assert delivered(r) == []
    st = message_status(r.store, a)
    assert (st.state, st.late_by_ms, st.deliver_at_ms) == (DROPPED, 20_000, T + 10_000)
    assert pending_by_topic(r.store) == {"t": 0}
    r.close_and_compare()


def test_a_late_retry_goes_to_its_group_s_dlq_before_the_group_read_a_retry(tmp_path):
    """A retry keeps its message's policy, and is filed in its group's retry log, which
    only that group reads: dead-lettered late, it went to the groups with progress in
    that log, which a group has only once it acked a retry. The first late retry went
    to no DLQ at all, counted dead-lettered and never read."""
    r = Replicas(tmp_path)
    r.apply(Entry(ACK, Watermark(T), T, acks=[("g", "t", 0, 0)]).encode())  # g reads t
    (a,) = r.apply(produce(T, T, [msg("a", T + 1_000, max_ms=1_000, on_late="dlq")])).ids
    r.apply(sync(T + 1_000))
    assert delivered(r) == [a]
    (copy,) = r.apply(
        Entry(RETRY, Watermark(T + 1_000), T + 1_000, retries=[("g", "t", 0, T + 5_000)]).encode()
    ).ids
    r.apply(sync(T + 60_000))  # the retry falls due 55 s late
    assert message_status(r.store, copy).state == DEAD_LETTERED
    assert delivered(r, "%DLQ%g") == [copy] and delivered(r, "%RETRY%g") == []
    r.close_and_compare()
