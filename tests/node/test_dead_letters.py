"""A group's dead-letter queue for operators (node/consumers/dead_letters.py), over a local log."""

from __future__ import annotations

import asyncio

from horologe.cluster import PRODUCE
from horologe.node.consumers.dead_letters import DeadLetters
from horologe.node.consumers.wire import as_json
from horologe.storage import id_strings

from . import test_consumers_scan as scan
from .test_consumers_scan import T, _deliver, consumers_over

log = scan.log  # the fixture: a local log whose clock the test sets


def test_a_requeue_leaves_what_a_consumer_of_the_dlq_holds(log):
    """A group that consumes its own DLQ holds an entry when an operator requeues all:
    the entry was produced again and acked under the consumer, which ran it as well."""

    async def run() -> None:
        await _deliver(log, 2)
        consumers = consumers_over(log)

        async def produce(columns) -> list[str]:
            done = await log.propose(PRODUCE, messages=columns)
            return id_strings(done.id_hours, done.id_gis)

        dlq = DeadLetters(
            log.view,
            produce,
            consumers.ack,
            consumers.receipts,
            log.clock,
            consumers.held_positions,
            consumers.held_meanwhile,
        )
        pulled = await consumers.pull("g", "t", None, 2, 0, 30_000)
        await consumers.nack("g", "t", pulled.receipts, dead_letter=True)
        held = await consumers.pull("g", "%DLQ%g", None, 1, 0, 30_000)
        (held_id,) = [m["id"] for m in as_json(held, T)["messages"]]
        answer = await dlq.requeue("g", None)
        assert [m["id"] for m in answer["requeued"]] != [held_id] and len(answer["requeued"]) == 1
        assert answer["leased"] == [held_id] and answer["remaining"] == 1
        assert await consumers.ack("g", "%DLQ%g", held.receipts) == 1

    asyncio.run(run())
