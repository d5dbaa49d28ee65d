"""A task cancelled while it waits with a timeout ends cancelled, unless it had ended
before the cancel came.

Python 3.11's ``asyncio.wait_for`` drops a cancellation that comes after what it waits
for finished and before the waiting task ran again (gh-86296; fixed in 3.12): the task
goes on as if nothing had happened. A push group cancelled that way in a pull's wait
went on leasing messages on the master and failing each through its closed pool, and
the push worker that waited for it never ended, so that node never pushed again (the
simulator with ``--push``, canary ``no-kept-cancel``). Every wait with a timeout on the
node's loop and in the SDK uses ``asyncio.timeout``, which keeps the cancellation.
"""

from __future__ import annotations

import asyncio

import pytest

from horologe.cluster.raft.loop_crossing import within

from .test_consumers_scan import consumers_over, log  # noqa: F401 - the fixture

YIELDS = range(6)  # loop turns between the wake-up and the cancel: one of them is the gap


@pytest.mark.parametrize("turns", YIELDS)
def test_a_waiting_pull_cancelled_as_it_is_woken_ends_cancelled(log, turns):  # noqa: F811
    async def run() -> bool:
        consumers = consumers_over(log)
        pull = asyncio.get_running_loop().create_task(consumers.pull("g", "t", None, 10, 300, 30_000))
        await asyncio.sleep(0.01)  # waiting: nothing is ready
        consumers.notify()
        for _ in range(turns):
            await asyncio.sleep(0)
        ended = pull.done()  # with the wake-up, before the cancel
        pull.cancel()
        await asyncio.wait([pull])
        return ended or pull.cancelled()

    assert asyncio.run(run())


@pytest.mark.parametrize("turns", YIELDS)
def test_a_proposal_waited_for_and_cancelled_as_it_is_answered_ends_cancelled(turns):
    """``within``: how the loop waits for the tick thread's answer to a proposal."""

    async def run() -> bool:
        answer = asyncio.get_running_loop().create_future()
        waiting = asyncio.get_running_loop().create_task(within(answer, 10.0, TimeoutError, "no answer"))
        await asyncio.sleep(0)
        answer.set_result("applied")
        for _ in range(turns):
            await asyncio.sleep(0)
        ended = waiting.done()  # with the answer, before the cancel
        waiting.cancel()
        await asyncio.wait([waiting])
        return ended or waiting.cancelled()

    assert asyncio.run(run())
