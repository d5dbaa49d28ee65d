"""Messages pulled ahead of their time are handed over once the master's clock reaches it."""

from __future__ import annotations

import asyncio
import time

from horologe.client.consuming import AsyncSubscription, Subscription
from horologe.client.holding import MasterClock, by_time, released
from horologe.client.models import PulledBatch, ReceivedMessage


def msg(n: int, deliver_at: int) -> ReceivedMessage:
    return ReceivedMessage(str(n), f"r{n}", "t", b"", (), deliver_at, deliver_at, 0)


def local_ms() -> float:
    """The subscription's local clock (here also the master's, so the offset is about 0)."""
    return time.monotonic() * 1000


def test_the_offset_is_the_tightest_bound_the_answers_give():
    clock = MasterClock()
    assert clock.release_at(5_000) == float("-inf")  # no stamp seen: nothing was pulled ahead
    clock.observe(1_000, 1_004)  # stamped 1000 by the master, read here at 1004: 4 ms in transit at least
    clock.observe(None, 1_010)  # a node that does not stamp says nothing
    assert clock.offset == -4
    clock.observe(2_000, 2_001)  # a quicker answer: the master is at most 1 ms behind
    clock.observe(3_000, 3_009)
    assert clock.offset == -1
    assert clock.release_at(5_000) == 5_001  # the master's clock reaches 5000 by then at the latest


def test_released_counts_the_prefix_the_master_has_reached():
    clock = MasterClock()
    clock.observe(100, 100)
    pending = by_time([msg(2, 130), msg(0, 90), msg(1, 110)])
    assert [m.id for m in pending] == ["0", "1", "2"]
    assert [released(clock, pending, t) for t in (89, 90, 120, 130)] == [0, 1, 2, 3]


class AheadGroup:
    """One batch stamped with the local clock (so the offset is about 0), its messages due
    ``lead_ms`` from now and 1 ms apart; then nothing."""

    def __init__(self, lead_ms: int, n: int = 3) -> None:
        now = int(local_ms())
        self.due = [now + lead_ms + k for k in range(n)]
        self.batches = [PulledBatch([msg(k, d) for k, d in enumerate(self.due)], ["b"], now)]
        self.acked: list[str] = []

    def pull(self):
        if self.batches:
            return self.batches.pop(0)
        time.sleep(0.01)
        return PulledBatch([], [], int(local_ms()))

    def ack(self, receipts: list[str]) -> None:
        self.acked += receipts


def test_next_holds_each_message_until_the_masters_clock_reaches_it():
    group = AheadGroup(lead_ms=150)
    with Subscription(group.pull, group.ack, prefetch=2, ack_queue=10) as sub:
        for _ in range(3):
            m = next(sub)
            assert local_ms() >= m.deliver_at - sub.clock.offset  # never before its time
    assert sorted(group.acked) == ["r0", "r1", "r2"]


def test_poll_waits_for_the_first_ones_time_within_its_timeout_and_hands_out_what_is_due():
    group = AheadGroup(lead_ms=300)
    with Subscription(group.pull, group.ack, prefetch=2, ack_queue=10) as sub:
        assert sub.poll(0.05) == []  # pulled already, but due only after the timeout
        got = []
        while len(got) < 3:
            handed = sub.poll(2.0)
            assert all(local_ms() >= m.deliver_at - sub.clock.offset for m in handed)
            got += handed
        assert [m.id for m in got] == ["0", "1", "2"]


def test_a_batch_due_whole_is_acked_by_its_batch_receipts():
    group = AheadGroup(lead_ms=-10)  # due already
    with Subscription(group.pull, group.ack, prefetch=2, ack_queue=10) as sub:
        assert [m.id for m in sub.poll(2.0)] == ["0", "1", "2"]
    assert group.acked == ["b"]


def test_the_async_subscription_holds_too():
    async def run() -> None:
        group = AheadGroup(lead_ms=150)

        async def pull():
            return group.pull()

        async def ack(receipts):
            group.ack(receipts)

        sub = AsyncSubscription(pull, ack, prefetch=2, ack_queue=10)
        assert await sub.poll(0.05) == []
        m = await sub.__anext__()
        assert local_ms() >= m.deliver_at - sub.clock.offset
        got = [m]
        while len(got) < 3:
            got += await sub.poll(2.0)
        assert all(local_ms() >= x.deliver_at - sub.clock.offset for x in got)
        await sub.close()
        assert sorted(group.acked) == ["r0", "r1", "r2"]

    asyncio.run(run())


def test_a_step_of_this_processs_wall_clock_releases_nothing_early(monkeypatch):
    """Held against the monotonic clock: the wall clock here stepping an hour ahead once
    the master's clock was read does not hand a message over before its time."""
    real_time = time.time  # the master's clock: this one before the step
    now = int(real_time() * 1000)
    due = now + 300
    batches = [PulledBatch([msg(0, due)], ["b"], now)]

    def pull():
        if batches:
            return batches.pop(0)
        time.sleep(0.01)
        return PulledBatch([], [], int(real_time() * 1000))

    with Subscription(pull, lambda _r: None, prefetch=1, ack_queue=10) as sub:
        deadline = time.monotonic() + 5
        while sub.clock.offset is None and time.monotonic() < deadline:
            time.sleep(0.005)
        monkeypatch.setattr(time, "time", lambda: real_time() + 3600)
        m = next(sub)
        assert real_time() * 1000 >= m.deliver_at - 1  # by the true clock: not early
