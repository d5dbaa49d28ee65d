"""Client.consume: prefetching pulls, acks in the background once the loop moves on."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time

import pytest

from horologe.client.consuming import AsyncSubscription, Subscription
from horologe.client.models import PulledBatch, ReceivedMessage


def msg(n: int) -> ReceivedMessage:
    return ReceivedMessage(str(n), f"r{n}", "t", b"%d" % n, (), 0, 0, 0)


class FakeGroup:
    """Pulls hand out the given batches, then nothing; acks are recorded."""

    def __init__(self, batches: list[list[int]]) -> None:
        self.batches = [[msg(n) for n in b] for b in batches]
        self.pulls = 0
        self.acked: list[list[str]] = []
        self.lock = threading.Lock()

    def pull(self) -> list[ReceivedMessage]:
        with self.lock:
            self.pulls += 1
            if self.batches:
                return self.batches.pop(0)
        time.sleep(0.01)  # a long poll that found nothing
        return []

    def ack(self, receipts: list[str]) -> None:
        with self.lock:
            self.acked.append(list(receipts))

    def all_acked(self) -> list[str]:
        with self.lock:
            return [r for group in self.acked for r in group]


def test_each_message_is_acked_once_the_loop_moves_on():
    group = FakeGroup([[1, 2], [3]])
    with Subscription(group.pull, group.ack, prefetch=2, ack_queue=10) as sub:
        first = next(sub)
        deadline = time.monotonic() + 5
        while group.pulls < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert group.pulls >= 2  # the next batch was pulled while the first was handled
        assert group.all_acked() == []  # not acked while the application holds it
        second, third = next(sub), next(sub)
        assert [first.id, second.id, third.id] == ["1", "2", "3"]
    assert sorted(group.all_acked()) == ["r1", "r2", "r3"]  # the last one acked by close()


def test_a_message_whose_handling_raised_is_not_acked():
    group = FakeGroup([[1, 2, 3]])
    with pytest.raises(ValueError, match="handler failed"):
        with Subscription(group.pull, group.ack, prefetch=2, ack_queue=10) as sub:
            for m in sub:
                if m.id == "2":
                    raise ValueError("handler failed")
    assert group.all_acked() == ["r1"]  # 2 comes back after its lease; 3 was never handed out


def test_an_async_message_whose_handling_raised_is_not_acked():
    group = FakeGroup([[1, 2, 3]])

    async def pull():
        return group.pull()

    async def ack(receipts):
        group.ack(receipts)

    async def run() -> None:
        async with AsyncSubscription(pull, ack, prefetch=2, ack_queue=10) as sub:
            async for m in sub:
                if m.id == "2":
                    raise ValueError("handler failed")

    with pytest.raises(ValueError, match="handler failed"):
        asyncio.run(run())
    assert group.all_acked() == ["r1"]


@pytest.mark.parametrize("polled", [False, True])
def test_the_message_handled_before_a_pull_failed_is_acked(polled):
    calls = []
    handed = threading.Event()

    def pull() -> list[ReceivedMessage]:
        calls.append(1)
        if len(calls) == 1:
            return [msg(1)]
        handed.wait(5)
        raise RuntimeError("node gone")

    acked: list[str] = []
    with pytest.raises(RuntimeError, match="node gone"):
        with Subscription(pull, acked.extend, prefetch=1, ack_queue=10, pulls=1) as sub:
            for _m in sub.poll(5) if polled else sub:
                handed.set()
                deadline = time.monotonic() + 5
                while sub._error is None and time.monotonic() < deadline:  # failed while handling
                    time.sleep(0.01)
            sub.poll(5)
    assert acked == ["r1"]  # the loop asked for more: 1 was handled


def test_a_pull_error_surfaces_in_the_loop():
    def failing() -> list[ReceivedMessage]:
        raise RuntimeError("node gone")

    sub = Subscription(failing, lambda _r: None, prefetch=1, ack_queue=1)
    with pytest.raises(RuntimeError, match="node gone"):
        next(sub)


def test_async_subscription_acks_and_closes():
    group = FakeGroup([[1, 2, 3]])

    async def pull():
        return group.pull()

    async def ack(receipts):
        group.ack(receipts)

    async def run() -> list[str]:
        seen = []
        async with AsyncSubscription(pull, ack, prefetch=2, ack_queue=10) as sub:
            async for m in sub:
                seen.append(m.id)
                if len(seen) == 3:
                    break
        return seen

    assert asyncio.run(run()) == ["1", "2", "3"]
    assert sorted(group.all_acked()) == ["r1", "r2", "r3"]


def test_a_batch_handed_over_whole_is_acked_by_its_batch_receipt():
    group = FakeGroup([])
    group.batches = [
        PulledBatch([msg(1), msg(2), msg(3)], ["b1-3"]),
        PulledBatch([msg(4), msg(5)], ["b4-5"]),
        PulledBatch([msg(6)], []),  # a node that gives no batch receipts
    ]
    with Subscription(group.pull, group.ack, prefetch=3, ack_queue=10) as sub:
        assert [m.id for m in sub.poll(5)] == ["1", "2", "3"]
        assert next(sub).id == "4"  # one by one from here: the rest is acked one by one
        assert [m.id for m in sub.poll(5)] == ["5"]
        assert [m.id for m in sub.poll(5)] == ["6"]
    assert sorted(group.all_acked()) == ["b1-3", "r4", "r5", "r6"]


def test_the_next_pull_is_fetched_while_the_last_answer_is_decoded():
    """decode(answer 1) waits until answer 2 is being fetched: done one after the other,
    the subscription would stall here and never hand message 1 over."""
    fetching = [threading.Event() for _ in range(3)]
    fetched = []

    def fetch():
        n = len(fetched) + 1
        fetched.append(n)
        if n <= len(fetching):
            fetching[n - 1].set()
        time.sleep(0.01)
        return n

    def decode(n):
        if n == 1:
            assert fetching[1].wait(5), "the second pull was not fetched during the first decode"
        return PulledBatch([msg(n)], [f"b{n}"]) if n <= 2 else PulledBatch()

    with Subscription(fetch, lambda _r: None, prefetch=2, ack_queue=10, decode=decode) as sub:
        assert [next(sub).id, next(sub).id] == ["1", "2"]


def test_the_masters_clock_is_read_at_arrival_not_after_decoding():
    """An answer stamped with the master's clock as it arrives, decoded 200 ms later:
    the estimate of the master's lead stays near 0, not 200 ms behind."""

    def fetch():  # the master's clock: here the subscription's own, the monotonic one
        return int(time.monotonic() * 1000)

    def decode(clock_ms):
        time.sleep(0.2)
        return PulledBatch([msg(1)], ["b"], clock_ms)

    with Subscription(fetch, lambda _r: None, prefetch=1, ack_queue=10, decode=decode) as sub:
        next(sub)
        assert -50 < sub.clock.offset <= 1


def test_the_async_subscription_fetches_the_next_pull_while_it_decodes_the_last():
    async def main() -> list[str]:
        second_fetched = asyncio.Event()
        fetched = []

        async def fetch():
            fetched.append(len(fetched) + 1)
            if len(fetched) == 2:
                second_fetched.set()
            await asyncio.sleep(0.01)
            return fetched[-1]

        async def decode(n):
            if n == 1:
                await asyncio.wait_for(second_fetched.wait(), 5)
            return PulledBatch([msg(n)], [f"b{n}"]) if n <= 2 else PulledBatch()

        async def ack(_receipts):
            pass

        async with AsyncSubscription(fetch, ack, prefetch=2, ack_queue=10, decode=decode) as sub:
            return [(await sub.__anext__()).id, (await sub.__anext__()).id]

    assert asyncio.run(main()) == ["1", "2"]


def test_prefetch_bounds_the_batches_pulled_ahead_of_the_application():
    """With nothing taken, ``prefetch`` batches ready and one more on its way are all that
    is pulled (their messages are leased meanwhile)."""
    group = FakeGroup([[k] for k in range(10)])
    with Subscription(group.pull, group.ack, prefetch=2, ack_queue=10) as sub:
        time.sleep(0.3)
        assert group.pulls == 3
        next(sub)  # one batch taken: one more may be pulled
        time.sleep(0.3)
        assert group.pulls == 4


def test_an_error_decoding_an_answer_surfaces_and_stops_the_pulls():
    group = FakeGroup([[1], [2], [3], [4]])
    first_taken = threading.Event()

    def decode(batch):
        if batch and batch[0].id == "2":
            first_taken.wait(5)
            raise ValueError("bad answer")
        return batch

    sub = Subscription(group.pull, group.ack, prefetch=1, ack_queue=10, decode=decode)
    assert next(sub).id == "1"
    first_taken.set()
    with pytest.raises(ValueError, match="bad answer"):
        next(sub)
    time.sleep(0.2)  # a pull already on its way when decoding failed may still end
    pulls = group.pulls
    time.sleep(0.3)
    assert group.pulls == pulls <= 3  # and then nothing more is leased
    with pytest.raises(ValueError):
        sub.close()


@pytest.mark.parametrize("pulls", [1, 2])
def test_pulls_on_their_way_at_once(pulls):
    """Each pull waits for its leases to commit; with two on their way, one consumer's
    waits overlap. Here the first two pulls answer only once both were sent."""
    both_sent = threading.Barrier(2, timeout=2)
    group = FakeGroup([[1], [2]])

    def pull() -> list[ReceivedMessage]:
        with group.lock:
            first_two = group.pulls < 2
        if first_two:
            both_sent.wait()  # raises BrokenBarrierError if the other never comes
        return group.pull()

    def consume() -> list[str]:
        with Subscription(pull, group.ack, prefetch=2, ack_queue=10, pulls=pulls) as sub:
            return sorted([next(sub).id, next(sub).id])

    if pulls == 1:
        with pytest.raises(threading.BrokenBarrierError):
            consume()
    else:
        assert consume() == ["1", "2"]


def test_async_pulls_on_their_way_at_once():
    group = FakeGroup([[1], [2]])
    in_flight, most = 0, 0

    async def pull() -> list[ReceivedMessage]:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.05)
        in_flight -= 1
        return group.pull()

    async def ack(receipts: list[str]) -> None:
        group.ack(receipts)

    async def run() -> list[str]:
        async with AsyncSubscription(pull, ack, prefetch=2, ack_queue=10, pulls=2) as sub:
            return sorted([(await sub.__anext__()).id, (await sub.__anext__()).id])

    assert asyncio.run(run()) == ["1", "2"] and most == 2


def test_what_was_pulled_and_never_handed_out_is_given_back_on_close():
    """The rest of the current batch and the batches pulled ahead were left leased to a
    subscription that had closed: the group got them again only after their lease."""
    group = FakeGroup([[1, 2, 3], [4, 5]])
    given_back: list[str] = []
    with Subscription(group.pull, group.ack, prefetch=2, ack_queue=10, give_back=given_back.extend) as sub:
        assert next(sub).id == "1"
        deadline = time.monotonic() + 5
        while group.pulls < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # the second batch pulled ahead
    assert group.all_acked() == ["r1"]  # the one handed out
    assert sorted(given_back) == ["r2", "r3", "r4", "r5"]


def test_an_answer_that_comes_in_as_it_closes_is_given_back():
    """A pull on its way when the subscription closes: its messages were leased to nobody."""
    arrived = threading.Event()
    pulls = [0]

    def pull() -> list[ReceivedMessage]:
        pulls[0] += 1
        if pulls[0] == 1:
            return [msg(1)]
        arrived.wait(5)  # still on its way as close begins
        time.sleep(0.05)
        return [msg(2)] if pulls[0] == 2 else []

    given_back: list[str] = []
    sub = Subscription(pull, lambda _r: None, prefetch=1, ack_queue=10, give_back=given_back.extend)
    assert next(sub).id == "1"
    arrived.set()
    sub.close()
    assert given_back == ["r2"]


def test_an_async_subscription_gives_back_what_it_never_handed_out():
    group = FakeGroup([[1, 2, 3], [4]])
    given_back: list[str] = []

    async def pull():
        return group.pull()

    async def ack(receipts):
        group.ack(receipts)

    async def give_back(receipts):
        given_back.extend(receipts)

    async def run() -> None:
        async with AsyncSubscription(pull, ack, prefetch=2, ack_queue=10, give_back=give_back) as sub:
            async for m in sub:
                assert m.id == "1"
                while group.pulls < 2:
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.05)  # the second batch decoded and waiting
                break

    asyncio.run(run())
    assert group.all_acked() == ["r1"]
    assert sorted(given_back) == ["r2", "r3", "r4"]


def test_an_async_subscription_gives_back_the_answers_it_was_decoding_or_handing_on_as_it_closed():
    """Closing cancelled the task decoding an answer and a puller waiting to hand the next
    on (the decoder's queue holds one): those answers' messages, leased, were dropped, and
    the group got them again only after their lease."""
    group = FakeGroup([[1], [2], [3], [4], [5]])
    given_back: list[str] = []

    async def pull():
        return group.pull()

    async def decode(answer):
        await asyncio.sleep(0.05)  # a large answer, decoded slowly
        return answer

    async def give_back(receipts):
        given_back.extend(receipts)

    async def run() -> None:
        sub = AsyncSubscription(
            pull, _ack_nothing, prefetch=1, ack_queue=10, decode=decode, pulls=2, give_back=give_back
        )
        first = await sub.__anext__()
        assert first.id == "1"
        await asyncio.sleep(0.02)  # the next answer being decoded, another waiting to be handed on
        await sub.close()

    asyncio.run(run())
    pulled = [f"r{k}" for k in range(1, group.pulls + 1) if k <= 5]
    assert sorted(given_back + ["r1"]) == sorted(pulled), (group.pulls, given_back)


async def _ack_nothing(receipts) -> None:
    return None


class Refused(Exception):
    pass


def _refused(_receipts) -> None:
    raise Refused("403: the token may not ack")


def test_an_ack_error_surfaces_in_the_loop_of_a_caught_up_consumer():
    """The ack fails while the loop waits for the next batch, which never comes (the
    consumer is caught up): the loop waited for ever instead of raising the error."""
    group = FakeGroup([[1]])
    sub = Subscription(group.pull, _refused, prefetch=1, ack_queue=10)
    assert next(sub).id == "1"
    failed: list[BaseException] = []

    def iterate() -> None:
        try:
            next(sub)
        except BaseException as e:  # noqa: BLE001 - what the loop raised
            failed.append(e)

    t = threading.Thread(target=iterate, daemon=True)
    t.start()
    t.join(10)
    assert [type(e) for e in failed] == [Refused]
    with contextlib.suppress(Refused):
        sub.close()


def test_an_ack_error_surfaces_in_the_loop_of_a_caught_up_async_consumer():
    async def go(sub: AsyncSubscription) -> None:
        assert (await sub.__anext__()).id == "1"
        await sub.__anext__()

    assert type(asyncio.run(_what_the_loop_raised(_refusing_one([1]), go))) is Refused


def test_an_async_ack_error_while_the_ack_queue_is_full_surfaces_in_the_loop():
    """The loop was putting a receipt into a full queue when the acker failed: nothing
    took receipts any more, and the put waited for ever."""
    group = FakeGroup([[1, 2, 3]])
    slow = asyncio.Event()

    async def pull():
        return group.pull()

    async def ack(receipts):
        await slow.wait()
        _refused(receipts)

    async def go(sub: AsyncSubscription) -> None:
        for _ in range(3):
            await sub.__anext__()
        asyncio.get_running_loop().call_later(0.2, slow.set)  # the ack fails meanwhile
        await sub.__anext__()  # puts the third receipt: the queue holds the second

    made = functools.partial(AsyncSubscription, pull, ack, prefetch=1, ack_queue=1)
    assert type(asyncio.run(_what_the_loop_raised(made, go))) is Refused


async def _what_the_loop_raised(made, go) -> BaseException | None:
    """Run ``go`` on the subscription ``made()`` (at most 10 s), then close it (which
    raises the ack's error again)."""
    sub = made()
    await sub.__aenter__()
    try:
        async with asyncio.timeout(10):
            await go(sub)
    except BaseException as e:  # noqa: BLE001 - what the loop raised
        return e
    finally:
        with contextlib.suppress(Refused):
            await sub.close()
    return None


def test_an_async_ack_error_is_raised_again_by_every_next_call():
    """A loop that caught the ack error and went on waited for ever (caught up): the error
    was handed over once, and the pulls went on leasing what nothing could ack."""

    async def go(sub: AsyncSubscription) -> None:
        assert (await sub.__anext__()).id == "1"
        with contextlib.suppress(Refused):
            await sub.__anext__()
        await sub.__anext__()  # again

    assert type(asyncio.run(_what_the_loop_raised(_refusing_one([1]), go))) is Refused


def _refusing_one(batch: list[int]):
    """An async subscription (made in the running loop) that pulls ``batch``, then nothing,
    and whose acks are refused."""
    group = FakeGroup([batch])

    async def pull():
        return group.pull()

    async def ack(receipts):
        _refused(receipts)

    return functools.partial(AsyncSubscription, pull, ack, prefetch=1, ack_queue=10)
