"""The stretched fire lead of a hot stretch (wheel/hot_lead.py), and the pending slots
the driver gives it (TimeWheel.pending_slots)."""

from __future__ import annotations

import numpy as np

from horologe.wheel import Watermark, ranks_looked_at, stretched_lead

from .harness import Node

T = 1_767_225_600_000  # 2026-01-01 00:00:00.000 UTC
LEAD, BATCH, CAP = 50, 1_000, 400


def plan(slots, now: int) -> tuple[int, int | None]:
    return stretched_lead(np.asarray(slots, dtype=np.int64), now, LEAD, LEAD, BATCH, CAP)


def test_less_than_a_batch_is_fired_the_lead_ahead():
    slots = [T + 10, T + 60, T + 200] + [T + 300] * 900
    assert plan(slots, T) == (T + LEAD, None)  # fired through now + lead; no stretch to wake for
    assert plan([], T) == (T + LEAD, None)


def test_the_batches_of_a_hot_millisecond_are_fired_a_lead_apart_the_last_one_a_lead_ahead():
    hot = [T + 1_000] * (5 * BATCH)  # five batches due at once
    starts = []
    now, pending = T, hot
    while pending:
        through, nxt = plan(pending, now)
        fired = sum(1 for s in pending if s <= through)
        if fired:
            starts.append(now)
            pending = pending[BATCH:]  # the wheel releases at most a batch per entry
        else:  # woken for the next batch, or for the last by the plain lead
            now = nxt if nxt is not None else pending[0] - LEAD
    # The first batch 4 leads ahead, then one a lead, the last one a lead before its time.
    assert starts == [T + 1_000 - k * LEAD for k in (5, 4, 3, 2, 1)]


def test_no_message_is_fired_further_ahead_than_the_cap():
    hot = [T + 1_000] * (20 * BATCH)  # would want 20 leads, the cap allows 8
    assert plan(hot, T + 1_000 - CAP - 1) == (T + 1_000 - CAP - 1 + LEAD, T + 1_000 - CAP)
    through, _ = plan(hot, T + 1_000 - CAP)
    assert through == T + 1_000  # all of it, in batches back to back from the cap on


def test_a_lead_of_zero_never_stretches():
    hot = np.full(5 * BATCH, T + 1_000, dtype=np.int64)
    assert stretched_lead(hot, T + 900, 0, 0, BATCH, CAP) == (T + 900, T + 1_000)
    assert stretched_lead(hot, T + 1_000, 0, 0, BATCH, CAP)[0] == T + 1_000


def test_pending_slots_are_those_ahead_of_the_watermark_in_delivery_order(tmp_path):
    node = Node(str(tmp_path), T)
    node.produce([T + 2_500, T + 500, T + 500, T + 1_200, T + 9_000], T)
    assert node.wheel.pending_slots(T + 2_500, 10).tolist() == [T + 500, T + 500, T + 1_200, T + 2_500]
    assert node.wheel.pending_slots(T + 2_500, 3).tolist() == [T + 500, T + 500, T + 1_200]
    node.wheel.advance_to(T + 500, 1)  # half of a millisecond released
    assert node.wheel.ws == Watermark(T + 500, 0)
    assert node.wheel.pending_slots(T + 1_200, 10).tolist() == [T + 500, T + 1_200]
    node.advance(T + 3_000)
    assert node.wheel.pending_slots(T + 8_999, 10).tolist() == []
    assert node.wheel.pending_slots(T + 9_000, 10).tolist() == [T + 9_000]
    node.close()


def test_the_driver_s_half_lead_holds_for_the_first_batch_and_the_stretch_counts_whole_leads():
    hot = np.full(2 * BATCH, T + 1_000, dtype=np.int64)  # the second batch is fired two leads ahead
    assert stretched_lead(hot, T, LEAD // 2, LEAD, BATCH, CAP) == (T + LEAD // 2, T + 1_000 - 2 * LEAD)
    one = hot[:BATCH]
    assert stretched_lead(one, T, LEAD // 2, LEAD, BATCH, CAP) == (T + LEAD // 2, None)


def test_the_first_ranks_looked_at_fire_what_all_of_them_would():
    """A wheel far behind (fast-forwarding) may have millions pending: the rule looks at
    the first ``ranks_looked_at`` only, and fires and wakes as it would with all."""
    assert ranks_looked_at(LEAD, BATCH, CAP) == 8 * BATCH and ranks_looked_at(0, BATCH, CAP) == BATCH + 1
    rng = np.random.default_rng(7)
    for step, lead, cap in ((LEAD, LEAD, CAP), (LEAD, LEAD // 2, CAP), (0, 0, CAP), (LEAD, LEAD, 20)):
        k = ranks_looked_at(step, BATCH, cap)
        for _ in range(200):
            spread = T + rng.integers(-2_000, 1_500, int(rng.integers(0, k)))
            hot = np.full(int(rng.integers(0, 3 * k)), T + int(rng.integers(-100, 1_500)))  # a hot ms
            slots = np.sort(np.concatenate([spread, hot]))
            now = T + int(rng.integers(-500, 500))
            whole = stretched_lead(slots, now, lead, step, BATCH, cap)
            first = stretched_lead(slots[:k], now, lead, step, BATCH, cap)
            # At most a batch is released an entry; after a whole one the wheel looks again.
            fired = [min(BATCH, int(np.searchsorted(slots, t, "right"))) for t in (whole[0], first[0])]
            assert fired[0] == fired[1], (step, lead, cap, len(slots), now)
            if fired[1] < BATCH:
                assert whole[1] == first[1], (step, lead, cap, len(slots), now)
