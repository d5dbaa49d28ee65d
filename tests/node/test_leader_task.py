"""What only the master runs is started on becoming master, cancelled on stepping down, and
a run that regains the role begins only once the cancelled one let go (node/leader_task.py)."""

from __future__ import annotations

import asyncio
import logging

from horologe.cluster import NotMasterError
from horologe.node.leader_task import LeaderTask, every
from horologe.storage import CorruptLogError


def _slow_to_let_go(events: list[str], letting_go: asyncio.Event):
    """A run that records when it begins, is cancelled and lets go, which it does only
    once ``letting_go`` is set (a wheel's syncs in flight, say)."""

    async def run():
        events.append("began")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            events.append("cancelled")
            await letting_go.wait()
            events.append("let go")
            raise

    return run


async def test_a_run_begins_only_after_the_cancelled_one_let_go():
    events = []
    letting_go = asyncio.Event()
    task = LeaderTask(_slow_to_let_go(events, letting_go), "t")
    assert task.start() and not task.start()  # a second start while leading is a no-op
    await asyncio.sleep(0)
    task.cancel()
    assert not task.leading
    assert task.start()  # the role came back at once
    await asyncio.sleep(0.01)
    assert events == ["began", "cancelled"]  # the new run waits
    letting_go.set()
    await asyncio.sleep(0.01)
    assert events == ["began", "cancelled", "let go", "began"]
    await task.close()
    assert not task.start()  # closed: a role change after shutdown starts nothing
    assert events[-1] == "cancelled" or events[-1] == "let go"


async def test_a_run_lost_and_regained_twice_begins_only_after_the_first_let_go():
    """The second run, cancelled while it waited for the first to let go, ended at once:
    a third waited for the second only, and ran beside the first (a push run settling its
    last acks); and a stop then returned with the first still running."""
    events = []
    letting_go = asyncio.Event()
    task = LeaderTask(_slow_to_let_go(events, letting_go), "t")
    task.start()
    await asyncio.sleep(0)
    try:
        for _ in range(2):  # lost and regained, twice
            task.cancel()
            task.start()
            await asyncio.sleep(0.01)
        assert events == ["began", "cancelled"]
        stopped = asyncio.create_task(task.stop())
        await asyncio.sleep(0.01)
        assert not stopped.done()  # the first has not let go
    finally:
        letting_go.set()
    await stopped
    assert events == ["began", "cancelled", "let go"]


async def test_is_current_tells_a_cancelled_run_from_the_current_one():
    seen = []
    task: LeaderTask

    async def run():
        seen.append(task.is_current())
        await asyncio.Event().wait()

    task = LeaderTask(run, "t")
    task.start()
    await asyncio.sleep(0)
    assert seen == [True]
    assert not task.is_current()  # the test's own task
    await task.close()


async def test_every_goes_on_after_a_refused_or_failed_turn(caplog):
    turns = []

    async def turn() -> bool:
        turns.append(len(turns))
        if len(turns) == 1:
            raise NotMasterError(None)
        if len(turns) == 2:
            raise ValueError("a read failed")
        return len(turns) < 5  # 3, 4: more waits; 5: done for this interval

    with caplog.at_level(logging.INFO, logger="horologe.node.leader_task"):
        loop = asyncio.create_task(every(1, turn, "probe"))
        while len(turns) < 6:
            await asyncio.sleep(0.005)
        loop.cancel()
    assert "probe turn skipped" in caplog.text and "probe turn failed" in caplog.text


async def test_every_reports_a_turn_that_met_damaged_files(caplog):
    seen: list[BaseException] = []

    async def turn() -> bool:
        raise CorruptLogError("/data/store/ready/t.log", 64)

    def damaged(e: BaseException) -> bool:
        seen.append(e)
        return isinstance(e, CorruptLogError)

    loop = asyncio.create_task(every(1, turn, "probe", damaged))
    while len(seen) < 2:
        await asyncio.sleep(0.005)
    loop.cancel()
    assert all(isinstance(e, CorruptLogError) for e in seen)
    assert "probe turn failed" not in caplog.text  # reported: no stack trace each turn
