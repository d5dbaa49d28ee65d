"""A push group's timing, against the integration tests' aiohttp receiver on 127.0.0.1
(tests/integration/push_receiver.py, which checks each signature): a message leased
ahead of its time goes out when the master's clock reads its time, never before, even
when that clock lags the timer (a quorum clock can stand still, a stepped one go back);
one still waiting when the group stops is given back, unsent."""

from __future__ import annotations

import asyncio
import time

from horologe.cluster.push_state import PushDef
from horologe.node.consumers.service import Pulled, Taken
from horologe.node.push.client import Answer, Exchange, PushHttp
from horologe.node.push.flow import Flow
from horologe.node.push.group import AHEAD_MS, RETRY_PAUSE_S, Consumer, PushStats, serve
from horologe.storage import CorruptLogError, Message, MessageId
from horologe.storage.message import encode_record

from ..integration.push_receiver import Push, Receiver, Reply

SECRET = "s" * 16


class Harness:
    """A receiver, a pull that leases one message due 5 ms after the clock's reading (then
    nothing), and the consumers' other calls, recorded; the master's clock stands still
    until moved."""

    def __init__(self) -> None:
        t0 = time.time_ns() // 1_000_000  # near the receiver's clock: it refuses stale signatures
        self.clock_ms = t0
        self.arrived: list[tuple[int, str]] = []  # (the clock when it arrived, id)
        self.asked_ahead: list[int] = []
        self.acked: list[str] = []
        self.given_back: list[str] = []
        self.due = t0 + 5
        self.mid = MessageId(self.due // 3_600_000, 7)
        self.record = encode_record(self.mid, Message("orders", b"x", self.due, t0))

    async def __aenter__(self) -> Harness:
        self.receiver = await asyncio.to_thread(Receiver(SECRET, self._answer).start)
        sub = PushDef("orders", "hooks", self.receiver.url, SECRET, 1_000, 4, 0, "*")
        self.http = PushHttp(4)
        consumer = Consumer(self._pull, self._ack, self._nack, lambda: self.clock_ms, self._give_back)
        flow = Flow(4, 0, time.monotonic)
        self.task = asyncio.create_task(serve(self.http, sub, consumer, flow, PushStats()))
        return self

    async def __aexit__(self, *exc) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.http.close()
        await asyncio.to_thread(self.receiver.stop)

    def _answer(self, push: Push) -> Reply:  # on the receiver's thread, as the push arrives
        assert push.signed, push
        self.arrived.append((self.clock_ms, push.id))
        return Reply()

    async def _pull(self, group, topic, tags, most, wait_ms, lease_ms, ahead_ms):
        self.asked_ahead.append(ahead_ms)
        if len(self.asked_ahead) == 1:
            return Pulled(Taken([self.record], [self.due], [self.due]), ["r1"], [], [1])
        await asyncio.sleep(wait_ms / 1000)
        return Pulled(Taken(), [], [], [])

    async def _ack(self, group, topic, receipts):
        self.acked.extend(receipts)
        return len(receipts)

    async def _nack(self, group, topic, receipts, retry_after_ms):
        raise AssertionError(f"nacked {receipts}")

    def _give_back(self, group, topic, receipts):
        self.given_back.extend(receipts)
        return len(receipts)


def test_a_held_message_waits_for_the_clock_not_only_for_its_timer():
    async def run() -> None:
        async with Harness() as h:
            await asyncio.sleep(0.1)  # twenty times the 5 ms its timer waits
            assert h.asked_ahead[0] == AHEAD_MS
            assert h.arrived == []  # the clock has not moved: not due, not sent
            h.clock_ms = h.due
            for _ in range(500):
                if h.acked:
                    break
                await asyncio.sleep(0.01)
            assert h.arrived == [(h.due, str(h.mid))] and h.acked == ["r1"]
        assert h.given_back == []

    asyncio.run(run())


def test_a_message_still_held_when_the_group_stops_is_given_back_unsent():
    async def run() -> None:
        async with Harness() as h:
            await asyncio.sleep(0.05)
            assert h.asked_ahead and h.arrived == []
        assert h.given_back == ["r1"] and h.arrived == [] and h.acked == []

    asyncio.run(run())


def test_a_lease_that_meets_damaged_files_says_so_and_tries_again(caplog):
    """A pull that meets damaged files (CorruptLogError) is reported to the node, which
    halts and stops leading (node/store_damage.py): the group tries again meanwhile, with
    no stack trace for each try."""
    seen: list[BaseException] = []

    async def pull(*_args):
        raise CorruptLogError("/data/store/delay/2026120110.log", 1604)

    def damaged(e: BaseException) -> bool:
        seen.append(e)
        return isinstance(e, CorruptLogError)

    async def run() -> None:
        http = PushHttp(1)
        consumer = Consumer(pull, None, None, lambda: 0, None, damaged)
        sub = PushDef("orders", "hooks", "http://127.0.0.1:9/", SECRET, 1_000, 4, 0, "*")
        task = asyncio.create_task(serve(http, sub, consumer, Flow(4, 0, time.monotonic), PushStats()))
        await asyncio.sleep(RETRY_PAUSE_S * 2.5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await http.close()

    asyncio.run(run())
    assert len(seen) >= 2 and all(isinstance(e, CorruptLogError) for e in seen)
    assert "lease failed" not in caplog.text


class HeldAnswers:
    """A pool whose requests are answered when the test says (PushHttp's interface)."""

    def __init__(self) -> None:
        self.sent: list[Exchange] = []

    def post(self, origin, data, timeout_s) -> Exchange:
        exchange = Exchange(origin, data, asyncio.get_running_loop().create_future())
        self.sent.append(exchange)
        return exchange


class AckingSlowly(Harness):
    """Two messages due at once, leased one pull apart; the first ack takes until released."""

    def __init__(self) -> None:
        super().__init__()
        self.due = self.clock_ms
        self.release_ack = asyncio.Event()
        self.acks_asked = 0
        self.pulls = 0

    async def _pull(self, group, topic, tags, most, wait_ms, lease_ms, ahead_ms):
        self.pulls += 1
        if self.pulls <= 2:
            mid = MessageId(self.due // 3_600_000, self.pulls)
            record = encode_record(mid, Message("orders", b"x", self.due, self.due))
            return Pulled(Taken([record], [self.due], [self.due]), [f"r{self.pulls}"], [], [1])
        await asyncio.sleep(wait_ms / 1000)
        return Pulled(Taken(), [], [], [])

    async def _ack(self, group, topic, receipts):
        self.acks_asked += 1
        await self.release_ack.wait()
        return await super()._ack(group, topic, receipts)


async def _until(done, what: str) -> None:
    for _ in range(500):
        if done():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not {what} in 5 s")


def test_what_was_answered_2xx_when_the_group_stops_is_acked_not_pushed_again():
    """A subscription updated or deleted stops its group: a push answered 2xx whose ack was
    not yet on its way was left unacked, so its lease ran out and it was pushed again."""
    h = AckingSlowly()
    http = HeldAnswers()

    async def run() -> None:
        sub = PushDef("orders", "hooks", "http://127.0.0.1:9/", SECRET, 1_000, 4, 0, "*")
        consumer = Consumer(h._pull, h._ack, h._nack, lambda: h.clock_ms, h._give_back)
        task = asyncio.create_task(serve(http, sub, consumer, Flow(4, 0, time.monotonic), PushStats()))
        await _until(lambda: len(http.sent) == 2, "both sent")
        http.sent[0].future.set_result(Answer(200))
        await _until(lambda: h.acks_asked == 1, "the first one's ack under way")
        http.sent[1].future.set_result(Answer(200))
        await asyncio.sleep(0)  # its answer taken in: the settler is busy with the first
        task.cancel()
        await asyncio.sleep(0.05)
        h.release_ack.set()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(run())
    assert sorted(h.acked) == ["r1", "r2"]


def test_an_answer_that_came_as_the_group_stopped_is_acked():
    """The 2xx arrived in the turn the stop began, its callback run after the stop's."""
    h = Harness()
    h.due = h.clock_ms  # due at once: sent as leased
    http = HeldAnswers()

    async def run() -> None:
        sub = PushDef("orders", "hooks", "http://127.0.0.1:9/", SECRET, 1_000, 4, 0, "*")
        consumer = Consumer(h._pull, h._ack, h._nack, lambda: h.clock_ms, h._give_back)
        task = asyncio.create_task(serve(http, sub, consumer, Flow(4, 0, time.monotonic), PushStats()))
        while not http.sent:
            await asyncio.sleep(0.01)
        task.cancel()  # the stop begins at the loop's next turn ...
        http.sent[0].future.set_result(Answer(200))  # ... and the answer's callback after it
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(run())
    assert h.acked == ["r1"]


def test_a_push_that_never_found_a_connection_is_given_back_not_a_failed_attempt():
    """Other receivers held every connection of the pool until its timeout passed: it was
    nacked as failed, and after the last retry level dead-lettered, its receiver never asked."""
    h = Harness()
    h.due = h.clock_ms  # due at once: sent as leased
    http = HeldAnswers()
    stats = PushStats()

    async def run() -> None:
        sub = PushDef("orders", "hooks", "http://127.0.0.1:9/", SECRET, 1_000, 4, 0, "*")
        consumer = Consumer(h._pull, h._ack, h._nack, lambda: h.clock_ms, h._give_back)
        task = asyncio.create_task(serve(http, sub, consumer, Flow(4, 0, time.monotonic), stats))
        await _until(lambda: http.sent, "sent")
        http.sent[0].future.set_result(Answer(None, None, "no connection free within 1000 ms", unsent=True))
        await _until(lambda: h.given_back, "given back")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(run())  # Harness._nack raises: nothing was nacked
    assert (h.given_back, h.acked, stats.failed, stats.in_flight) == (["r1"], [], 0, 0)
