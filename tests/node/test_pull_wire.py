"""A pull answered as msgpack (the SDK's) says what the JSON answer says, message by message."""

from __future__ import annotations

import asyncio

import msgpack

from horologe.client.models import ReceivedMessage
from horologe.cluster import PRODUCE, SYNC
from horologe.node.pull_wire import as_json, as_msgpack
from horologe.storage import Message
from horologe.wheel import ALL, Watermark

from . import test_consumers_scan
from .test_consumers_scan import T, consumers_over

log = test_consumers_scan.log  # the same fixture: a LocalLog whose clock the test sets


def both(pulled) -> tuple[list[ReceivedMessage], list[ReceivedMessage], list[str], list[str]]:
    js = as_json(pulled, 5)
    mp = msgpack.unpackb(as_msgpack(pulled, 5), raw=False)
    assert js["clock_ms"] == mp["clock_ms"] == 5  # the master's clock, for consumers that hold
    return (
        [ReceivedMessage.from_json(d) for d in js["messages"]],
        [ReceivedMessage.from_record(*m) for m in mp["messages"]],
        js["batch_receipts"],
        mp["batch_receipts"],
    )


def test_msgpack_and_json_answers_name_the_same_messages(log):
    messages = [
        Message("t", b"text", T, T, ("red",), "k1", {"h": "v"}),
        Message("t", b"\xff\x00binary", T, T, (), None, {}),
        Message("t", "naïve ✓".encode(), T, T, ("red", "blue"), None, {"x-horologe-topic": "elsewhere"}),
    ]

    async def run() -> None:
        await log.propose(PRODUCE, messages=messages)
        log.now[0] = T + 1
        log.ws = lambda: Watermark(T, ALL)
        await log.propose(SYNC)
        consumers = consumers_over(log)
        task = asyncio.create_task(consumers.ack_commit.run())
        pulled = await consumers.pull("g", "t", None, 10, 0, 30_000)
        from_json, from_msgpack, json_batch, msgpack_batch = both(pulled)
        assert from_msgpack == from_json
        assert [m.body for m in from_msgpack] == [m.body for m in messages]
        assert [m.topic for m in from_msgpack] == ["t", "t", "elsewhere"]  # the origin header rules
        assert from_msgpack[0].tags == ("red",) and from_msgpack[0].headers == {"h": "v"}
        assert [m.key for m in from_msgpack] == ["k1", None, None]  # the producer's, when given
        assert msgpack_batch == json_batch and len(json_batch) == 1
        assert await consumers.nack("g", [from_msgpack[0].receipt]) == {"retried": 1, "dead_lettered": 0}
        # The retry's copy lives in %RETRY%g and says where it came from.
        log.now[0] = T + 1_001
        log.ws = lambda: Watermark(T + 1_001, ALL)
        await log.propose(SYNC)
        retried = await consumers.pull("g", "t", "red", 10, 0, 30_000)
        from_json, from_msgpack, *_ = both(retried)
        assert from_msgpack == from_json
        assert [(m.topic, m.attempt, m.body, m.key) for m in from_msgpack] == [("t", 1, b"text", None)]
        task.cancel()

    asyncio.run(run())
