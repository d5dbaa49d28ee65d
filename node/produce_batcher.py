"""Group commit for produce: requests arriving within ``window_ms`` share one P entry."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from horologe.cluster import ApplyResult
from horologe.storage import Message, MessageId

MAX_ENTRY_BYTES = 1024 * 1024  # a quarter of the Raft batch size (field notes)


class ProduceBatcher:
    def __init__(self, propose: Callable[[list[Message]], Awaitable[ApplyResult]], window_ms: int) -> None:
        self._propose = propose
        self._window = window_ms / 1000
        self._queue: asyncio.Queue[tuple[list[Message], asyncio.Future]] = asyncio.Queue()

    async def submit(self, messages: list[Message]) -> list[MessageId]:
        fut = asyncio.get_running_loop().create_future()
        await self._queue.put((messages, fut))
        return await fut

    async def run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            size = sum(len(m.body) + 128 for m in batch[0][0])
            deadline = asyncio.get_running_loop().time() + self._window
            while size < MAX_ENTRY_BYTES:
                timeout = deadline - asyncio.get_running_loop().time()
                if timeout <= 0:
                    break
                try:
                    item = await asyncio.wait_for(self._queue.get(), timeout)
                except TimeoutError:
                    break
                batch.append(item)
                size += sum(len(m.body) + 128 for m in item[0])
            await self._commit(batch)

    async def _commit(self, batch: list[tuple[list[Message], asyncio.Future]]) -> None:
        messages = [m for msgs, _ in batch for m in msgs]
        try:
            res = await self._propose(messages)
            if res.error:
                raise RuntimeError(res.error)
        except Exception as e:  # noqa: BLE001 - every waiter must hear about it
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(e)
            return
        at = 0
        for msgs, fut in batch:
            if not fut.done():
                fut.set_result(res.ids[at : at + len(msgs)])
            at += len(msgs)
