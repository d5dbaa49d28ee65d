"""Boundaries, long delays, hot seconds, realign and the wire form of the wheel state."""

from __future__ import annotations

import numpy as np
import pytest

from horologe.wheel import (
    ALL,
    DelayTooLongError,
    FastForward,
    InvalidWatermarkError,
    Sleep,
    TimeWheel,
    Watermark,
    realign,
)

from .harness import Node

MIDNIGHT = 1_767_225_600_000  # 2026-01-01 00:00:00.000 UTC


def slots(due) -> list[int]:
    return [int(x) for x in due["slot_ms"]]


@pytest.mark.parametrize("edge", [MIDNIGHT, MIDNIGHT + 3_600_000 * 7])
def test_hour_and_day_boundaries(tmp_path, edge):
    node = Node(str(tmp_path), edge - 5_000)
    times = [edge - 1, edge, edge + 1, edge - 1000, edge + 999]
    node.produce(times, edge - 5_000)
    assert slots(node.advance(edge - 1001)) == []
    assert slots(node.advance(edge - 1)) == [edge - 1000, edge - 1]
    assert node.store.mapped_hours() == {(edge - 1) // 3_600_000, edge // 3_600_000}
    assert slots(node.advance(edge)) == [edge]
    assert node.store.mapped_hours() == {edge // 3_600_000, edge // 3_600_000 + 1}
    assert slots(node.advance(edge + 5_000)) == [edge + 1, edge + 999]
    node.close()


def test_one_year_delay(tmp_path):
    year = 365 * 86_400_000
    node = Node(str(tmp_path), MIDNIGHT)
    node.produce([MIDNIGHT + year, MIDNIGHT + 10], MIDNIGHT)
    assert node.wheel.next_due_ms() == MIDNIGHT + 10
    node.advance(MIDNIGHT + 10)
    assert node.wheel.next_due_ms() == MIDNIGHT + year
    assert slots(node.advance(MIDNIGHT + year - 1)) == []
    assert slots(node.advance(MIDNIGHT + year)) == [MIDNIGHT + year]
    assert node.wheel.next_due_ms() is None
    node.close()


def test_beyond_the_hour_wheel_is_refused(tmp_path):
    node = Node(str(tmp_path), MIDNIGHT, max_delay_ms=86_400_000)
    with pytest.raises(DelayTooLongError):
        node.wheel.on_append([MIDNIGHT + 86_400_001])
    node.close()


def test_hot_second_of_200k(tmp_path):
    node = Node(str(tmp_path), MIDNIGHT)
    hot = MIDNIGHT + 60_000
    rng = np.random.default_rng(3)
    for _ in range(40):  # 40 batches of 5,000 spread over the second's milliseconds
        node.produce([hot + int(x) for x in rng.integers(0, 1000, 5000)], MIDNIGHT)
    total = 0
    last = (0, -1)
    while True:  # released in bounded batches, as a fast-forward would
        due = node.wheel.advance_to(hot + 999, 25_000)
        keys = list(zip(due["slot_ms"].tolist(), due["local_index"].tolist(), strict=True))
        assert keys == sorted(keys) and (not keys or keys[0] > last)
        last = keys[-1] if keys else last
        total += len(due)
        if len(due) < 25_000:
            break
    assert total == 200_000
    assert node.wheel.ws == Watermark(hot + 999, ALL)
    node.close()


def test_late_arrival_for_a_firing_second_is_delivered_on_arrival(tmp_path):
    node = Node(str(tmp_path), MIDNIGHT)
    node.produce([MIDNIGHT + 500] * 3, MIDNIGHT)
    node.wheel.advance_to(MIDNIGHT + 500, 2)  # a hot millisecond half released
    assert node.wheel.ws == Watermark(MIDNIGHT + 500, 1)
    (late,) = node.produce([MIDNIGHT + 500], MIDNIGHT + 500)
    assert late not in node.delivered_when  # same ms, not behind W: the wheel fires it next
    assert slots(node.advance(MIDNIGHT + 500)) == [MIDNIGHT + 500, MIDNIGHT + 500]
    (past,) = node.produce([MIDNIGHT + 100], MIDNIGHT + 500)
    assert past in node.delivered_when  # behind W: delivered by the apply itself
    node.close()


def test_realign_sleeps_when_the_tick_is_ahead_and_fast_forwards_when_behind(tmp_path):
    ws = Watermark(MIDNIGHT + 10_000, ALL)
    assert realign(ws, MIDNIGHT) == Sleep(MIDNIGHT + 10_000)
    plan = realign(ws, MIDNIGHT + 20_000, batch_limit=3)
    assert plan == FastForward(MIDNIGHT + 10_000, MIDNIGHT + 20_000, 3)

    node = Node(str(tmp_path), MIDNIGHT)
    node.produce([MIDNIGHT + 1_000 * k for k in range(1, 11)], MIDNIGHT)
    node.advance(MIDNIGHT + 2_000)
    wheel = TimeWheel(node.store, Watermark.from_wire(node.ws.to_wire()))
    # the new master's clock is 10 s behind the tick: nothing moves
    assert len(wheel.advance_to(MIDNIGHT - 8_000)) == 0
    assert wheel.ws == node.ws
    # its clock is far ahead: the expired seconds come out in batches of 3
    batches = [len(b) for b in wheel.fast_forward(realign(wheel.ws, MIDNIGHT + 30_000, 3))]
    assert batches == [3, 3, 2]
    node.close()


def test_wire_form(tmp_path):
    w = Watermark(MIDNIGHT + 1234, 7)
    assert w.to_wire() == {"tick": (MIDNIGHT + 1234) // 1000, "local_index": 7, "ms": MIDNIGHT + 1234}
    assert Watermark.from_wire(w.to_wire()) == w
    assert Watermark.from_wire(Watermark(5).to_wire()) == Watermark(5, ALL)
    for bad in (
        {},
        {"tick": 1, "local_index": 0, "ms": 5},
        {"tick": "x", "local_index": 0, "ms": 1},
        {"tick": 0, "local_index": -2, "ms": 1},
    ):
        with pytest.raises(InvalidWatermarkError):
            Watermark.from_wire(bad)


def test_idle_wheel_reports_nothing_due(tmp_path):
    node = Node(str(tmp_path), MIDNIGHT)
    assert node.wheel.next_due_ms() is None
    assert len(node.advance(MIDNIGHT + 86_400_000)) == 0
    assert node.wheel.on_append([MIDNIGHT + 86_400_000 + 5])  # earlier than "never": wake
    assert not node.wheel.on_append([MIDNIGHT + 86_400_000 + 9])
    node.close()


def test_arrivals_before_a_far_next_message_leave_no_second_loaded_past_the_preload(tmp_path):
    """With only a message a week away pending, asking when the next is due moved the
    horizon (every second before it loaded) a week ahead: each second that an arrival
    then brought before it stayed loaded (an object each) until the wheel reached it, the
    master's memory growing with the backlog."""
    week = 7 * 86_400_000
    node = Node(str(tmp_path), MIDNIGHT)
    node.produce([MIDNIGHT + week], MIDNIGHT)
    assert node.wheel.next_due_ms() == MIDNIGHT + week
    later = [MIDNIGHT + 3_600_000 + 7_001 * i for i in range(1000)]
    node.produce(later, MIDNIGHT)
    assert node.wheel.pending_seconds_loaded() <= 20
    assert node.wheel.next_due_ms() == later[0]  # still told the earliest
    due = node.advance(later[-1])
    assert slots(due) == later
    assert node.wheel.next_due_ms() == MIDNIGHT + week
    node.produce([MIDNIGHT + week - 5], MIDNIGHT)  # before the far one, past the preload
    assert node.wheel.next_due_ms() == MIDNIGHT + week - 5
    assert slots(node.advance(MIDNIGHT + week)) == [MIDNIGHT + week - 5, MIDNIGHT + week]
    assert node.wheel.next_due_ms() is None
    node.close()
