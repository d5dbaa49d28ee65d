"""The push worker over fake consumers and a fake pool: a group it stops (its subscription
replaced or deleted) is waited for when the worker stops (node/push/worker.py)."""

from __future__ import annotations

import asyncio
import dataclasses

from horologe.cluster.push_state import PushDef
from horologe.node.consumers.service import Pulled, Taken
from horologe.node.push.allow import PushAllow
from horologe.node.push.client import Answer, Exchange
from horologe.node.push.worker import PushWorker
from horologe.storage import Message, MessageId
from horologe.storage.message import encode_record

T = 1_767_225_600_000
SUB = PushDef("orders", "hooks", "http://127.0.0.1:9/hook", "s" * 16, 1_000, 4, 0, "*", incarnation=1)


class AnsweredAtOnce:
    """A pool whose every push is answered 200 at once."""

    def post(self, origin, data: bytes, timeout_s: float) -> Exchange:
        exchange = Exchange(origin, data, asyncio.get_running_loop().create_future())
        exchange.future.set_result(Answer(200, None))
        return exchange

    async def close(self) -> None:
        pass


def _worker(subs: list[PushDef], pull, ack) -> PushWorker:
    async def nack(group, topic, receipts, retry_after_ms):
        raise AssertionError("no nack")

    async def barrier():
        return None

    return PushWorker(
        lambda: subs,
        barrier,
        pull,
        ack,
        nack,
        lambda group, topic, receipts: len(receipts),
        lambda: T,
        PushAllow(("127.0.0.1",)),
        http=AnsweredAtOnce,
    )


async def _nothing(group, topic, tags, most, wait_ms, lease_ms, ahead_ms):
    await asyncio.sleep(wait_ms / 1000)
    return Pulled(Taken(), [], [], [])


async def test_the_figures_of_a_subscription_deleted_are_forgotten():
    """They were kept for as long as the node led: every subscription made and deleted
    meanwhile left its figures, and one made again under the same names showed the old."""
    subs = [SUB]
    worker = _worker(subs, _nothing, None)
    worker.start()
    for _ in range(100):
        await asyncio.sleep(0.01)
        if worker.stats:
            break
    assert list(worker.stats) == [("orders", "hooks")]
    subs.clear()
    worker.refresh()
    await asyncio.sleep(0.01)
    assert worker.stats == {}
    await worker.close()


async def test_a_group_stopped_for_a_new_definition_is_waited_for_when_the_worker_stops():
    """The task of a subscription replaced was cancelled and forgotten: the worker's stop
    returned while it still settled its last acks (up to 5 s), and the node went on to
    close what those acks go through."""
    subs = [SUB]
    acking, acked, ack_may_end = asyncio.Event(), [], asyncio.Event()
    pulls = [0]

    async def pull(group, topic, tags, most, wait_ms, lease_ms, ahead_ms):
        pulls[0] += 1
        if pulls[0] == 1:
            record = encode_record(MessageId(T // 3_600_000, 1), Message(topic, b"x", T, T))
            return Pulled(Taken([record], [T], [T]), ["r1"], [], [1])
        await asyncio.sleep(wait_ms / 1000)
        return Pulled(Taken(), [], [], [])

    async def ack(group, topic, receipts):
        acking.set()
        await ack_may_end.wait()
        acked.extend(receipts)
        return len(receipts)

    worker = _worker(subs, pull, ack)
    worker.start()
    await asyncio.wait_for(acking.wait(), 5)
    subs[:] = [dataclasses.replace(SUB, incarnation=2)]  # replaced while its ack commits
    worker.refresh()
    await asyncio.sleep(0.01)
    closing = asyncio.create_task(worker.close())
    try:
        await asyncio.sleep(0.05)
        assert not closing.done()  # the replaced group settles still
    finally:
        ack_may_end.set()
    await asyncio.wait_for(closing, 5)
    assert acked == ["r1"]
