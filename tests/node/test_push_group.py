"""A push group's timing, against a real aiohttp receiver on 127.0.0.1: a message leased
ahead of its time goes out when the master's clock reads its time, never before, even
when that clock lags the timer (a quorum clock can stand still, a stepped one go back)."""

from __future__ import annotations

import asyncio
import json
import time

from aiohttp import web

from horologe.cluster.push_state import PushDef
from horologe.node.consumers import Pulled, Taken
from horologe.node.push_flow import Flow
from horologe.node.push_group import AHEAD_MS, Consumer, PushStats, serve
from horologe.node.push_http import PushHttp
from horologe.storage import Message, MessageId
from horologe.storage.message import encode_record

T0 = 1_800_000_000_000


def test_a_held_message_waits_for_the_clock_not_only_for_its_timer():
    async def run() -> None:
        clock = {"ms": T0}  # the master's clock: it stands still until the test moves it
        arrived: list[tuple[int, str]] = []  # (the clock when it arrived, id)

        async def hook(request: web.Request) -> web.Response:
            arrived.append((clock["ms"], json.loads(await request.read())["id"]))
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_post("/hook", hook)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]

        due = T0 + 5
        mid = MessageId(due // 3_600_000, 7)
        record = encode_record(mid, Message("orders", b"x", due, T0))
        asked_ahead: list[int] = []

        async def pull(group, topic, tags, most, wait_ms, lease_ms, ahead_ms):
            asked_ahead.append(ahead_ms)
            if len(asked_ahead) == 1:
                return Pulled(Taken([record], [due], [due]), ["r1"], [])
            await asyncio.sleep(wait_ms / 1000)
            return Pulled(Taken(), [], [])

        acked: list[str] = []

        async def ack(group, receipts):
            acked.extend(receipts)
            return len(receipts)

        async def nack(group, receipts, retry_after_ms):
            raise AssertionError(f"nacked {receipts}")

        sub = PushDef("orders", "hooks", f"http://127.0.0.1:{port}/hook", "s" * 16, 1_000, 4, 0, "*")
        http = PushHttp(4)
        consumer = Consumer(pull, ack, nack, lambda: clock["ms"])
        task = asyncio.create_task(serve(http, sub, consumer, Flow(4, 0, time.monotonic), PushStats()))
        try:
            await asyncio.sleep(0.1)  # twenty times the 5 ms its timer waits
            assert asked_ahead[0] == AHEAD_MS
            assert arrived == []  # the clock still reads T0: not due, not sent
            clock["ms"] = due
            for _ in range(500):
                if acked:
                    break
                await asyncio.sleep(0.01)
            assert arrived == [(due, str(mid))] and acked == ["r1"]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await http.close()
            await runner.cleanup()

    asyncio.run(run())
