"""The master's retention turn over a real state machine and committed view: it proposes a
cut only when data is old enough and every group passed it; consumers keep their offsets."""

from __future__ import annotations

import asyncio

import pytest

from horologe.cluster import PRODUCE, SYNC, TRIM
from horologe.cluster.retention import Cut
from horologe.node.consumers.receipts import Receipts
from horologe.node.consumers.service import Consumers
from horologe.node.consumers.wire import as_json
from horologe.node.errors import ReceiptExpired
from horologe.node.http.errors import ApiError
from horologe.node.retention_driver import RetentionDriver
from horologe.storage import Message, MessageExpiredError, StorageConfig, check_store
from horologe.storage.delay_index import MS_PER_HOUR
from horologe.wheel import ALL, Watermark

from .local_log import LocalLog

T = 1_767_225_600_000
DAY_MS = 86_400_000


@pytest.fixture
def log(tmp_path):
    now = [T]
    log = LocalLog(str(tmp_path / "s"), lambda: now[0], StorageConfig(fsync=False, ready_segment_entries=4))
    log.now = now
    yield log
    log.close()


def driver(log: LocalLog, leads=lambda: True) -> RetentionDriver:
    async def propose_cut(cut: Cut):
        return await log.propose(TRIM, hour=cut.hour, ready=sorted(cut.ready.items()))

    return RetentionDriver(log.view.reads, propose_cut, log.clock, DAY_MS, 1000, leads)


async def deliver(log: LocalLog, n: int, at: int) -> list:
    res = await log.propose(PRODUCE, messages=[Message("t", b"m%d" % i, at, at) for i in range(n)])
    log.now[0] = at + 1
    log.ws = lambda: Watermark(at, ALL)
    await log.propose(SYNC)
    return res.ids


def test_a_turn_cuts_what_is_old_and_passed_and_consumers_keep_their_offsets(log):
    async def run() -> None:
        ids = await deliver(log, 6, T)
        consumers = Consumers(log.view, log.propose, log.clock, (1000,), 50, Receipts("secret"))
        acks = asyncio.create_task(consumers.run())
        got = as_json(await consumers.pull("g", "t", None, 6, 0, 30_000), T)["messages"]
        await consumers.ack("g", "t", [m["receipt"] for m in got[:5]])  # offset 5 stays leased
        turn = driver(log)
        assert await turn.turn() is None  # delivered a moment ago
        log.now[0] = T + DAY_MS + 2 * MS_PER_HOUR
        log.ws = lambda: Watermark(log.now[0], ALL)  # the wheel's syncs follow the clock
        await log.propose(SYNC)
        assert await driver(log, leads=lambda: False).turn() is None  # not the master
        cut = await turn.turn()
        assert cut is not None and cut.ready == {"t": 4}  # [0, 4) passed; [4, 6) holds the lease
        reads = log.view.reads
        assert reads.ready_base("t") == 4 and reads.hours() == [T // MS_PER_HOUR]
        # the leased offset is still where it was: acking it works
        assert await consumers.ack("g", "t", [got[5]["receipt"]]) == 1
        # and a receipt of a removed offset is a clear 404, not someone else's message
        with pytest.raises(ReceiptExpired) as e:
            await consumers.nack("g", "t", [got[0]["receipt"]])
        answer = ApiError.of(e.value)
        assert answer.status == 404 and answer.body()["error"]["code"] == "expired"
        log.now[0] += 1
        cut = await turn.turn()
        assert cut.ready == {"t": 6} and reads.ready_base("t") == 6
        assert reads.hours() == []
        with pytest.raises(MessageExpiredError):
            log.view.status(ids[0])
        assert await turn.turn() is None  # nothing left to cut
        # new deliveries take offsets 6.. and a pull finds them
        await deliver(log, 2, log.now[0])
        later = as_json(await consumers.pull("g", "t", None, 10, 0, 30_000), T)["messages"]
        assert [m["body"] for m in later] == ["m0", "m1"]
        assert reads.read_ready("t")["hour"].tolist() == [log.now[0] // MS_PER_HOUR] * 2
        assert turn.cuts_proposed == 2
        acks.cancel()

    asyncio.run(run())
    check_store(log.machine.store)
