"""A group's progress: a committed offset and the acked ranges above it."""

from __future__ import annotations

import random

import msgpack
import numpy as np

from horologe.cluster.consumer_groups import GroupProgress, merge_ranges, to_ranges
from horologe.cluster.entries import ACK, Entry, decode
from horologe.wheel import Watermark


def test_ranges_merge_into_the_fewest_sorted_ones():
    assert merge_ranges([(5, 7), (1, 2), (2, 4), (6, 9), (3, 3)]) == [(1, 4), (5, 9)]
    assert to_ranges([4, 1, 2, 2, 7]) == [(1, 3), (4, 5), (7, 8)]


def test_to_ranges_covers_each_offset_once_whatever_the_order():
    rng = random.Random(3)
    for _ in range(300):
        lo = rng.randrange(5)
        offsets = list(range(lo, lo + rng.randrange(1, 9)))  # runs in order take a short way
        if rng.random() < 0.6:
            offsets += rng.choices(range(12), k=rng.randrange(3))
        if rng.random() < 0.5:
            rng.shuffle(offsets)
        ranges = to_ranges(offsets)
        assert [o for lo, hi in ranges for o in range(lo, hi)] == sorted(set(offsets))
        assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False))  # the fewest


def test_acks_fold_into_committed_when_they_reach_it():
    p = GroupProgress().ack([(3, 5), (8, 9)])
    assert (p.committed, p.acked) == (0, ((3, 5), (8, 9)))
    assert [o for o in range(10) if p.is_acked(o)] == [3, 4, 8]
    p = p.ack([(0, 3)])
    assert (p.committed, p.acked) == (5, ((8, 9),))
    p = p.ack([(2, 6), (5, 8)])  # below committed, overlapping: all folded
    assert (p.committed, p.acked) == (9, ())


def test_any_order_of_acks_gives_the_same_progress():
    rng = random.Random(7)
    offsets = list(range(500))
    rng.shuffle(offsets)
    p = GroupProgress()
    for k in range(0, 500, 7):
        p = p.ack(to_ranges(offsets[k : k + 7]))
        assert all(p.is_acked(o) for o in offsets[: k + 7])
        assert not any(p.is_acked(o) for o in offsets[k + 7 :])
    assert (p.committed, p.acked) == (500, ())


def test_wire_form_round_trips_and_the_per_offset_form_is_read():
    p = GroupProgress(10).ack([(12, 15), (20, 21)])
    assert GroupProgress.from_wire(p.to_wire()) == p
    assert GroupProgress.from_wire({"c": 10, "a": [14, 12, 13, 20]}) == p
    assert GroupProgress.from_wire({"c": 10, "a": [10, 11]}) == GroupProgress(12)
    assert GroupProgress.from_wire(None) == GroupProgress()


def test_skip_to_keeps_acks_above_the_new_base():
    p = GroupProgress(0).ack([(5, 7), (9, 12)])
    assert p.skip_to(10) == GroupProgress(12)
    assert p.skip_to(6) == GroupProgress(7, ((9, 12),))


def test_an_ack_entry_of_the_per_offset_form_reads_as_one_offset_ranges():
    d = msgpack.unpackb(Entry(ACK, Watermark(0), 0).encode())
    d["acks"] = [["g", "t", 4], ["g", "t", 6, 9]]
    blob = msgpack.packb(d)
    assert decode(blob).acks == [("g", "t", 4, 5), ("g", "t", 6, 9)]


def test_acked_mask_is_is_acked_of_each_offset():
    rng = random.Random(11)
    for _ in range(50):
        ranges = [(lo, lo + rng.randint(1, 5)) for lo in rng.sample(range(100), 12)]
        progress = GroupProgress(rng.randint(0, 30)).ack(ranges)
        offsets = np.array(rng.sample(range(120), 60), dtype=np.int64)
        assert progress.acked_mask(offsets).tolist() == [progress.is_acked(int(o)) for o in offsets]


def test_first_unacked_and_unacked_end_agree_with_the_acked_offsets_one_by_one():
    rng = random.Random(7)
    for _ in range(300):
        committed = rng.randrange(5)
        p = GroupProgress(committed).ack(
            [(lo, lo + rng.randrange(1, 6)) for lo in (rng.randrange(40) for _ in range(rng.randrange(6)))]
        )
        unacked = [o for o in range(200) if not p.is_acked(o)]
        start, count = p.committed + rng.randrange(30), rng.randrange(1, 20)
        assert p.first_unacked(start) == next(o for o in unacked if o >= start)
        assert p.unacked_end(start, count) == [o for o in unacked if o >= start][count - 1] + 1
