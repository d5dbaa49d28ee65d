"""A pull answered as msgpack, by columns (the SDK's) or by messages, says what the JSON
answer says, message by message."""

from __future__ import annotations

import asyncio

import msgpack

from horologe.client.calls import MSGPACK
from horologe.client.core import pull_answer, to_pulled
from horologe.client.models import ReceivedMessage
from horologe.cluster import PRODUCE, SYNC
from horologe.node.consumers.wire import as_columns, as_json, as_msgpack
from horologe.storage import Message
from horologe.wheel import ALL, Watermark

from . import test_consumers_scan
from .test_consumers_scan import T, consumers_over

log = test_consumers_scan.log  # the same fixture: a LocalLog whose clock the test sets


async def delivered(log, messages: list[Message]) -> tuple:
    """``messages`` stored, due and delivered; consumers over them, their committer running."""
    await log.propose(PRODUCE, messages=messages)
    log.now[0] = T + 1
    log.ws = lambda: Watermark(T, ALL)
    await log.propose(SYNC)
    consumers = consumers_over(log)
    return consumers, asyncio.create_task(consumers.run())


def both(pulled) -> tuple[list[ReceivedMessage], list[ReceivedMessage], list[str], list[str]]:
    js = as_json(pulled, 5)
    mp_raw, cols_raw = as_msgpack(pulled, 5), as_columns(pulled, 5)
    mp = msgpack.unpackb(mp_raw, raw=False, use_list=False)
    cols = msgpack.unpackb(cols_raw, raw=False, use_list=False)
    assert (
        js["clock_ms"] == mp["clock_ms"] == cols["clock_ms"] == 5
    )  # the master's clock, for consumers that hold
    assert all(isinstance(r, tuple) for r in cols["records"])  # flat, as the node writes records
    by_messages = to_pulled(pull_answer(mp_raw, MSGPACK), None)[0]
    by_columns = to_pulled(pull_answer(cols_raw, MSGPACK), None)[0]
    assert by_columns == by_messages and list(by_columns.batch_receipts) == list(mp["batch_receipts"])
    return (
        [ReceivedMessage.from_json(d) for d in js["messages"]],
        list(by_columns),
        js["batch_receipts"],
        list(cols["batch_receipts"]),
    )


def test_msgpack_and_json_answers_name_the_same_messages(log):
    messages = [
        Message("t", b"text", T, T, ("red",), "k1", {"h": "v"}),
        Message("t", b"\xff\x00binary", T, T, (), None, {}),
        Message("t", "naïve ✓".encode(), T, T, ("red", "blue"), None, {"x-horologe-topic": "elsewhere"}),
    ]

    async def run() -> None:
        consumers, task = await delivered(log, messages)
        pulled = await consumers.pull("g", "t", None, 10, 0, 30_000)
        from_json, from_msgpack, json_batch, msgpack_batch = both(pulled)
        assert from_msgpack == from_json
        assert [m.body for m in from_msgpack] == [m.body for m in messages]
        assert [m.topic for m in from_msgpack] == ["t", "t", "elsewhere"]  # the origin header rules
        assert from_msgpack[0].tags == ("red",) and from_msgpack[0].headers == {"h": "v"}
        assert [m.key for m in from_msgpack] == ["k1", None, None]  # the producer's, when given
        assert msgpack_batch == json_batch and len(json_batch) == 1
        assert await consumers.nack("g", "t", [from_msgpack[0].receipt]) == {"retried": 1, "dead_lettered": 0}
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


def test_a_flat_record_in_another_key_order_or_a_map_reads_the_same():
    fields = {"topic": "t", "id": "0" * 32, "tags": ("a",), "body": b"x", "deliver_at_ms": 1, "key": None}
    fields |= {"headers": {}, "attempt": 2, "produced_at_ms": 0}
    flat = tuple(v for kv in fields.items() for v in kv)
    from_map = ReceivedMessage.from_record(fields, "r", 10, 11)
    assert ReceivedMessage.from_record(flat, "r", 10, 11) == from_map
    assert (from_map.id, from_map.topic, from_map.tags, from_map.attempt) == ("0" * 32, "t", ("a",), 2)


def test_a_message_handed_out_again_carries_its_count_in_json_and_by_columns(log):
    async def run() -> None:
        consumers, task = await delivered(log, [Message("t", b"a", T, T), Message("t", b"b", T, T)])
        first = await consumers.pull("g", "t", None, 10, 0, 30_000)
        assert await consumers.release("g", "t", first.receipts[1:]) == 1
        again = await consumers.pull("g", "t", None, 10, 0, 30_000)
        from_json = [ReceivedMessage.from_json(d) for d in as_json(again, 5)["messages"]]
        by_columns = list(to_pulled(pull_answer(as_columns(again, 5), MSGPACK), None)[0])
        assert by_columns == from_json and [(m.body, m.deliveries) for m in by_columns] == [(b"b", 2)]
        assert [m.deliveries for m in both(first)[1]] == [1, 1]
        task.cancel()

    asyncio.run(run())
