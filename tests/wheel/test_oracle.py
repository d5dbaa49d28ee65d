"""The wheel against a heap oracle: same set, same order, nothing early, no duplicates, nothing lost."""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horologe.storage import MessageId, check_store

from .harness import HeapOracle, Node

T0 = 1_767_225_600_000 - 30_000  # 30 s before 2026-01-01 00:00 UTC: a day and hour edge

offsets = st.one_of(
    st.integers(-120_000, -1),  # in the past
    st.integers(-2, 3),  # around now, to the millisecond
    st.integers(0, 999),  # this second
    st.integers(1_000, 20_000),  # seconds ahead, inside and beyond the preload
    st.integers(3_500_000, 3_700_000),  # around the next hour
    st.integers(60 * 86_400_000, 90 * 86_400_000),  # months ahead
)

step = st.one_of(
    st.tuples(st.just("produce"), st.lists(offsets, min_size=1, max_size=12)),
    st.tuples(
        st.just("advance"),
        st.one_of(st.integers(0, 3), st.integers(0, 4000)),
        st.one_of(st.none(), st.integers(1, 5)),
    ),
    st.tuples(st.just("jump"), st.integers(3_000_000, 4_000_000)),
    st.tuples(st.just("restart"), st.booleans()),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=40))
def test_wheel_matches_heap_oracle(steps):
    root = tempfile.mkdtemp(prefix="hz-wheel-")
    now = T0
    node = Node(root, now)
    oracle = HeapOracle()
    try:
        for s in steps:
            if s[0] == "produce":
                ids = node.produce([now + off for off in s[1]], now)
                for mid, off in zip(ids, s[1], strict=True):
                    if node.delivered_when.get(mid) is None:
                        oracle.add(mid, now + off)
            elif s[0] in ("advance", "jump"):
                now += s[1]
                limit = s[2] if s[0] == "advance" else None
                before = len(node.delivered)
                node.advance(now, limit)
                got = node.delivered[before:]
                assert got == oracle.pop_due(now, limit)
            else:
                node.restart(reopen_store=s[1])
        # drain everything, months ahead, in bounded batches
        now += 200 * 86_400_000
        while True:
            before = len(node.delivered)
            node.advance(now, 7)
            got = node.delivered[before:]
            assert got == oracle.pop_due(now, 7)
            if len(got) < 7:
                break
        assert oracle.heap == []
        assert len(set(node.delivered)) == len(node.delivered) == len(node.deliver_at)
        for mid in node.delivered:
            assert node.delivered_when[mid] >= node.deliver_at[mid], f"{mid} early"
        check_store(node.store)
    finally:
        node.close()
        shutil.rmtree(root, ignore_errors=True)


def test_ids_round_trip_through_due_rows(tmp_path):
    node = Node(str(tmp_path), T0)
    ids = node.produce([T0 + 5, T0 + 5, T0 + 1], T0)
    due = node.advance(T0 + 10)
    assert [MessageId(int(r["hour"]), int(r["global_index"])) for r in due] == [ids[2], ids[0], ids[1]]
    node.close()


def test_nothing_is_released_a_millisecond_early(tmp_path):
    node = Node(str(tmp_path), T0)
    node.produce([T0 + 1, T0 + 2], T0)
    assert len(node.advance(T0)) == 0
    assert len(node.advance(T0 + 1)) == 1
    assert node.wheel.next_due_ms() == T0 + 2
    node.close()


def test_arrival_into_a_preloaded_second_is_seen(tmp_path):
    node = Node(str(tmp_path), T0)
    node.produce([T0 + 5_000], T0)
    node.advance(T0 + 1)  # preloads the second at +5 s
    node.produce([T0 + 5_100, T0 + 4_900], T0 + 1)
    assert node.wheel.next_due_ms() == T0 + 4_900
    due = node.advance(T0 + 6_000)
    assert [int(r["slot_ms"]) - T0 for r in due] == [4_900, 5_000, 5_100]
    node.close()
