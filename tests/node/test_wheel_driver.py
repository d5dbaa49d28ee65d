"""The wheel driver built without a node: a view, a proposal function and a clock, on virtual time."""

from __future__ import annotations

import asyncio
import inspect
from collections import deque

import pytest

from horologe.cluster import PRODUCE, SYNC
from horologe.node.config import NodeConfig
from horologe.node.wheel_driver import WheelDriver, WheelSettings, _let_go
from horologe.storage import CorruptLogError, Message, MessageLimits

from .local_log import LocalLog
from .virtual_time import VirtualLoop

T = 1_767_225_600_000


def _driver(
    tmp_path,
    lead_ms: int = 0,
    lead_max_ms: int = 0,
    sync=None,
    damaged=lambda e: False,
    sync_interval_ms: int = 50,
) -> tuple[VirtualLoop, LocalLog, WheelDriver]:
    """A driver over a local log, on virtual time (tests/node/virtual_time.py): run the
    test's coroutine with the loop's ``run``; the clock starts at ``T``. ``sync``: how the
    driver's S entries are proposed, given the log (at once by default); ``damaged``: the
    driver's."""
    loop = VirtualLoop()
    log = LocalLog(str(tmp_path / "s"), lambda: T + int(loop.time() * 1000))
    driver = WheelDriver(
        log.view.reads,
        lambda: log.view.ws,
        (lambda now: sync(log, now)) if sync else (lambda now: log.propose(SYNC, clock_ms=now)),
        log.clock,
        WheelSettings(
            fire_batch_limit=1000, sync_interval_ms=sync_interval_ms, lead_ms=lead_ms, lead_max_ms=lead_max_ms
        ),
        damaged=damaged,
    )
    log.ws = lambda: driver.ws  # entries carry the live watermark, as the node stamps them
    log.listeners.append(lambda res: driver.on_append(res.pending_slots))
    return loop, log, driver


def _runs() -> list[asyncio.Task]:
    """The wheel's runs still alive (node/leader_task.py names each run's task)."""
    return [t for t in asyncio.all_tasks() if t.get_name() == "wheel" and not t.done()]


async def _until(predicate, turns: int = 400) -> bool:
    for _ in range(turns):
        if predicate():
            return True
        await asyncio.sleep(0.01)
    return predicate()


def test_fires_what_is_stored_before_and_after_it_leads(tmp_path):
    loop, log, driver = _driver(tmp_path)

    async def run() -> None:
        await log.propose(PRODUCE, messages=[Message("t", b"early", T + 30, T)])
        driver.start()
        assert await _until(lambda: log.view.reads.ready_count("t") == 1)
        # Stored while it leads, due shortly: on_append shortens the wait.
        await log.propose(PRODUCE, messages=[Message("t", b"late", log.clock() + 40, T)])
        assert await _until(lambda: log.view.reads.ready_count("t") == 2)
        # A batch of them: the slots of one entry reach the wheel together.
        soon = log.clock() + 40
        await log.propose(PRODUCE, messages=[Message("t", b"b%d" % i, soon + i, T) for i in range(3)])
        assert await _until(lambda: log.view.reads.ready_count("t") == 5)
        assert driver.syncs_led >= 2
        await driver.stop()
        assert driver.wheel is None

    try:
        loop.run(run())
    finally:
        log.close()


def test_idle_it_syncs_every_sync_interval_and_turns_every_50_ms(tmp_path):
    """With nothing due, the master proposes an S every ``sync_interval_ms`` (the node's
    default), each an append and an fsync on every node; its wheel still turns every 50 ms,
    so the watermark that proposals carry stays within a turn of the clock (plus the lead),
    and a message produced to be due now goes to the ready log as its entry applies."""
    interval = NodeConfig.__dataclass_fields__["sync_interval_ms"].default
    syncs: list[int] = []

    def counted(log, now):
        syncs.append(now)
        return log.propose(SYNC, clock_ms=now)

    loop, log, driver = _driver(tmp_path, lead_ms=20, sync=counted, sync_interval_ms=interval)

    async def run() -> None:
        driver.start()
        assert await _until(lambda: driver.wheel is not None)
        start, behind = len(syncs), []
        for _ in range(200):  # 2 s, idle
            await asyncio.sleep(0.01)
            behind.append(log.clock() - driver.ws.ms)
        assert len(syncs) - start <= 9  # 2 s at one S each 250 ms, not 40 at one each 50 ms
        assert max(behind) <= 50  # a turn at most: it was not left at the last S
        now = log.clock()
        await log.propose(PRODUCE, messages=[Message("t", b"now", now, now)])
        assert log.view.reads.ready_count("t") == 1  # behind the watermark it carried
        await driver.stop()

    try:
        loop.run(run())
    finally:
        log.close()


def test_a_message_stored_behind_the_wheel_but_ahead_of_its_entrys_stamp_is_synced_at_once(tmp_path):
    """A produce stamped with the wheel's watermark, then a turn that fires nothing and
    moves the wheel past the message's time, then the produce applies: stored pending (its
    entry's watermark had not passed it), behind the wheel (which never fires it again). It
    waited for the next S, up to ``sync_interval_ms`` later (250 ms by default)."""
    interval = NodeConfig.__dataclass_fields__["sync_interval_ms"].default
    loop, log, driver = _driver(tmp_path, lead_ms=50, sync_interval_ms=interval)

    async def run() -> None:
        driver.start()
        assert await _until(lambda: driver.syncs_led >= 2)  # an S has just committed
        stamped, due = driver.ws, log.clock() + 30
        await asyncio.sleep(0.051)  # a turn that fires nothing: the wheel passes ``due``
        assert driver.ws.passed(due)
        await log.propose(PRODUCE, ws=stamped, messages=[Message("t", b"x", due, log.clock())])
        assert log.view.reads.ready_count("t") == 0  # pending: behind the wheel only
        assert await _until(lambda: log.view.reads.ready_count("t") == 1, turns=5)
        await driver.stop()

    try:
        loop.run(run())
    finally:
        log.close()


def test_losing_and_regaining_the_role_at_once_leaves_one_leader(tmp_path):
    loop, log, driver = _driver(tmp_path)

    async def run() -> None:
        driver.start()
        assert await _until(lambda: driver.wheel is not None)
        first = driver.wheel
        driver.cancel()
        driver.start()  # regained before the first run let go
        assert await _until(lambda: driver.wheel is not None and driver.wheel is not first)
        assert len(_runs()) == 1  # the cancelled run is gone; only the new one leads
        await driver.stop()
        assert driver.wheel is None and _runs() == []

    try:
        loop.run(run())
    finally:
        log.close()


def test_stop_ends_a_run_whose_cancel_was_swallowed(tmp_path):
    """A stop while the run waits for an S ends the run, even when the proposal would
    swallow a cancel (asyncio.wait_for in 3.11 can return a result and drop the cancel
    that raced it): the run waits behind a shield, which the cancel ends at once."""
    loop, log, _ = _driver(tmp_path)

    in_sync = asyncio.Event()

    async def swallowing_sync(now: int) -> None:
        in_sync.set()
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            pass  # as wait_for does when the inner result is in at the same moment
        await log.propose(SYNC, clock_ms=now)

    driver = WheelDriver(
        log.view.reads,
        lambda: log.view.ws,
        swallowing_sync,
        log.clock,
        WheelSettings(fire_batch_limit=1000, sync_interval_ms=50),
    )

    async def run() -> None:
        driver.start()
        assert await _until(lambda: driver.wheel is not None)
        in_sync.clear()
        await in_sync.wait()  # the run is inside a sync now: the cancel lands there
        await asyncio.wait_for(driver.stop(), 5)  # a hang here is the bug
        assert driver.wheel is None and _runs() == []

    try:
        loop.run(run())
    finally:
        log.close()


def test_the_next_turn_does_not_wait_for_the_last_sync_to_commit(tmp_path):
    """Commits that take 100 ms: what falls due meanwhile is proposed in the next S, with at
    most ``syncs_in_flight`` of them uncommitted at a time, and no S delivers a message
    stamped before it was due."""
    loop, log, _ = _driver(tmp_path)
    in_flight, most = 0, 0

    def slow_sync(now: int):
        """Stamped with the watermark of this moment, as the node's submit does."""
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        ws = driver.ws

        async def commit():
            nonlocal in_flight
            await asyncio.sleep(0.1)
            in_flight -= 1
            return await log.propose(SYNC, clock_ms=now, ws=ws)

        return commit()

    driver = WheelDriver(
        log.view.reads,
        lambda: log.view.ws,
        slow_sync,
        log.clock,
        WheelSettings(fire_batch_limit=1000, sync_interval_ms=50, syncs_in_flight=2),
    )
    log.ws = lambda: driver.ws

    async def run() -> None:
        driver.start()
        assert await _until(lambda: driver.wheel is not None)
        soon = log.clock() + 20
        await log.propose(PRODUCE, messages=[Message("t", b"m%d" % i, soon + 15 * i, T) for i in range(8)])
        assert await _until(lambda: log.view.reads.ready_count("t") == 8)
        rows = log.view.reads.read_ready("t")
        assert (rows["delivered_at_ms"] >= rows["deliver_at_ms"]).all()
        await driver.stop()

    try:
        loop.run(run())
    finally:
        log.close()
    assert most == 2


def test_a_message_at_the_delay_limit_does_not_lose_its_entrys_others(tmp_path):
    """Found by the fuzz test: a deliver time 400 days after its producer's clock is valid,
    but the watermark trails that clock, so the wheel, bounded from the watermark, threw in
    on_append, and a message of the same entry due at once was never delivered."""
    loop, log, driver = _driver(tmp_path)
    limit = MessageLimits().max_delay_ms

    async def run() -> None:
        driver.start()
        assert await _until(lambda: driver.wheel is not None)
        produced = driver.ws.ms + 1_000  # the producer's clock, ahead of the watermark
        at_limit = Message("t", b"far", produced + limit, produced)
        soon = Message("t", b"soon", log.clock() + 40, produced)
        await log.propose(PRODUCE, messages=[at_limit, soon])
        assert await _until(lambda: log.view.reads.ready_count("t") == 1)
        assert driver.wheel.next_due_ms() == produced + limit
        await driver.stop()

    try:
        loop.run(run())
    finally:
        log.close()


def test_with_a_lead_the_wheel_commits_what_falls_due_that_far_ahead(tmp_path):
    """``lead_ms``: each S is stamped with the clock but delivers what falls due up to the
    lead ahead of it, so every message reaches the ready log before its time and is
    recorded as delivered at its own deliver time, never before. The wheel wakes once the
    first is due within half the lead, so one S delivers all five (80 ms apart at most)."""
    loop, log, driver = _driver(tmp_path, lead_ms=500)

    async def run() -> None:
        driver.start()
        assert await _until(lambda: driver.wheel is not None)
        soon = log.clock() + 700
        await log.propose(PRODUCE, messages=[Message("t", b"m%d" % i, soon + 20 * i, T) for i in range(5)])
        assert await _until(lambda: log.view.reads.ready_count("t") == 5)
        rows = log.view.reads.read_ready("t")
        assert rows["delivered_at_ms"].tolist() == rows["deliver_at_ms"].tolist()
        first = next(e for e in log.proposed if e.kind == SYNC and e.ws.ms >= soon)
        assert first.clock_ms < soon  # the S that delivered the first one was stamped before it was due
        assert first.ws.ms >= soon + 80  # and it delivered the last one too
        await driver.stop()

    try:
        loop.run(run())
    finally:
        log.close()


def _hot_millisecond(tmp_path, lead_max_ms: int) -> None:
    """Five batches due at one millisecond, on virtual time (tests/node/virtual_time.py).
    Each S entry takes 20 ms to commit, one after the other: within the half lead (25 ms)
    ahead of which the wheel fires the last batch, and five of them are not."""
    commits = asyncio.Lock()

    async def sync(log: LocalLog, now: int):
        async with commits:
            await asyncio.sleep(0.020)
            return await log.propose(SYNC, clock_ms=now)

    loop, log, driver = _driver(tmp_path, lead_ms=50, lead_max_ms=lead_max_ms, sync=sync)

    async def run() -> None:
        driver.start()
        assert await _until(lambda: driver.wheel is not None)
        due = log.clock() + 1_500
        for k in range(5):  # five batches' worth, all due at one millisecond
            await log.propose(
                PRODUCE, messages=[Message("t", b"%d" % i, due, T) for i in range(1000 * k, 1000 * k + 1000)]
            )
        assert await _until(lambda: log.view.reads.ready_count("t") == 5000, turns=300)
        assert all_ready_at[0] < due, "the last batch reached the ready log after its time"
        rows = log.view.reads.read_ready("t")
        assert set(rows["delivered_at_ms"].tolist()) == {due}  # recorded at its time, never before
        fired = [e.clock_ms for e in log.proposed if e.kind == SYNC and e.ws.ms >= due]
        assert due - 1_000 <= fired[0] <= due - 200  # four leads ahead at least, the cap at most
        await driver.stop()

    all_ready_at: list[int] = []  # when the last message reached the ready log

    def applied(_res) -> None:
        if not all_ready_at and log.view.reads.ready_count("t") == 5000:
            all_ready_at.append(log.clock())

    log.listeners.append(applied)
    try:
        loop.run(run())
    finally:
        log.close()


def test_a_hot_millisecond_is_fired_a_batch_a_lead_apart_and_all_of_it_before_its_time(tmp_path):
    """More than a batch due at once: the wheel fires the batches a lead apart, the last
    one a lead ahead of its time (wheel/hot_lead.py), not from a lead ahead back to back,
    which ended after the time once each batch took longer to commit; and never further
    ahead than ``lead_max_ms``."""
    _hot_millisecond(tmp_path, lead_max_ms=1000)


def test_without_the_stretch_a_hot_millisecond_ends_after_its_time(tmp_path):
    """The same with no room to stretch (``lead_max_ms`` 0): the batches go back to back
    from a lead ahead, and the last reaches the ready log after its time."""
    with pytest.raises(AssertionError, match="after its time"):
        _hot_millisecond(tmp_path, lead_max_ms=0)


def test_a_sync_let_go_before_its_wait_ran_still_takes_the_proposals_refusal():
    """A run that stops (its role lost) in the turn that proposed an S lets the S go before
    the task that waits for it took a step. The proposal's answer, a refusal coming after,
    is taken all the same: cancelled before its first step, that task never awaited it,
    and asyncio reported the refusal as never retrieved (found by the simulator's node services)."""

    async def answer_of(proposal: asyncio.Future) -> object:
        return await proposal

    async def run() -> tuple[str, list[dict]]:
        loop = asyncio.get_running_loop()
        reported: list[dict] = []
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        proposal = loop.create_future()
        answer = answer_of(proposal)  # what the driver's proposal of an S returns
        driver = WheelDriver(None, lambda: None, lambda now: answer, lambda: T, WheelSettings(1000, 50))  # type: ignore[arg-type]
        _let_go(deque([driver._sync(T)]))
        proposal.set_exception(RuntimeError("entry not committed: reason 4"))
        for _ in range(3):
            await asyncio.sleep(0)
        state = inspect.getcoroutinestate(answer)
        answer.close()
        return state, reported

    assert asyncio.run(run()) == (inspect.CORO_CLOSED, [])


def test_a_turn_that_meets_damaged_files_says_so_and_leads_again(tmp_path, caplog):
    """A turn that meets damaged files (CorruptLogError) is reported to the node, which
    halts and stops leading (node/store_damage.py); meanwhile the driver leads again, with
    no stack trace for each try."""
    seen: list[BaseException] = []

    def damaged_sync(_log, now: int) -> None:
        raise CorruptLogError("/data/store/delay/2026120110.log", 1604)

    def damaged(e: BaseException) -> bool:
        seen.append(e)
        return isinstance(e, CorruptLogError)

    loop, log, driver = _driver(tmp_path, sync=damaged_sync, damaged=damaged)

    async def run() -> None:
        driver.start()
        assert await _until(lambda: len(seen) >= 2)
        await driver.stop()

    try:
        loop.run(run())
    finally:
        log.close()
    assert all(isinstance(e, CorruptLogError) for e in seen)
    assert "wheel driver failed" not in caplog.text
