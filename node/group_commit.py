"""Group commit: one proposal in flight; what arrives meanwhile shares the next one.

A call that finds the committer idle is proposed at once, with whatever else is
already queued; calls arriving while that proposal is in flight queue up and go
together in the next one (up to ``MAX_ITEMS_BYTES`` of items). So a lone call pays one commit
and no wait, and under load entries grow instead of the queue. ``window_ms`` > 0 adds
a linger: after the first call, wait up to that long for more before proposing.

Each caller gets the combined result and where its own items start in it. Used for
produce (one P entry for many requests; the items of a call are a ``MessageColumns``,
combined by its ``concat``) and for acks (one A entry for many acks; lists, joined).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_ENTRY_BYTES = 1024 * 1024  # a quarter of the Raft batch size (field notes)
# An entry's own fields (type, watermark, clock, list heads: 77 bytes at most) fit in
# this; the items of one proposal take at most the rest.
ENTRY_HEADROOM = 1024
MAX_ITEMS_BYTES = MAX_ENTRY_BYTES - ENTRY_HEADROOM


def _joined(chunks: list[list]) -> list:
    return [x for chunk in chunks for x in chunk]


class GroupCommit(Generic[T, R]):
    def __init__(
        self,
        commit: Callable[[T], Awaitable[R]],
        window_ms: int,
        size_of: Callable[[T], int],
        combine: Callable[[list[T]], T] = _joined,
    ) -> None:
        """``T``: what a call submits, items with a ``len`` (a list, by default);
        ``size_of`` says how many bytes of an encoded entry they take (never less), and
        ``combine`` makes one of many for a proposal. A call's items must fit one entry
        (``MAX_ITEMS_BYTES``) unless they are a single item: callers split bigger ones."""
        self._commit = commit
        self._window = window_ms / 1000
        self._size_of = size_of
        self._combine = combine
        self._queue: asyncio.Queue[tuple[T, int, asyncio.Future]] = asyncio.Queue()
        self._held: tuple[T, int, asyncio.Future] | None = None
        self._gathering: list[tuple[T, int, asyncio.Future]] = []  # the next proposal, its window open

    async def submit(self, items: T, size: int | None = None) -> tuple[R, int]:
        """Wait for the proposal that carries ``items`` (``size`` bytes of it, when the
        caller knows; else what ``size_of`` says); return its result and their offset in it."""
        return await self.enqueue(items, size)

    def enqueue(self, items: T, size: int | None = None) -> asyncio.Future:
        """:meth:`submit`, queued before this returns: items queued one after another go
        in that order, in one proposal or the next."""
        size = self._size_of(items) if size is None else size
        if size > MAX_ITEMS_BYTES and len(items) > 1:
            raise ValueError(f"{len(items)} items of {size} bytes: over one entry's {MAX_ITEMS_BYTES}")
        fut = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((items, size, fut))
        return fut

    def fail_waiting(self, error: Exception) -> int:
        """Fail every call not yet proposed with ``error`` (the proposal in flight goes on);
        how many. A master that stops leading fails the leases its pulls took, which it
        forgot with its role: proposed after it leads again, they would commit beside the
        leases its new scans take of the same messages."""
        waiting = [*self._gathering, *([self._held] if self._held is not None else [])]
        self._held = None
        while not self._queue.empty():
            waiting.append(self._queue.get_nowait())
        for _, _, fut in waiting:
            if not fut.done():
                fut.set_exception(error)
        return len(waiting)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = self._gathering = [self._held or await self._queue.get()]
            self._held = None
            size = batch[0][1]
            deadline = loop.time() + self._window
            while True:
                if not self._queue.empty():
                    item = self._queue.get_nowait()
                elif (timeout := deadline - loop.time()) > 0:
                    try:
                        async with asyncio.timeout(timeout):  # not wait_for: it can drop a cancel
                            item = await self._queue.get()
                    except TimeoutError:
                        break
                else:
                    break
                grown = size + item[1]
                if grown > MAX_ITEMS_BYTES:
                    self._held = item  # it opens the next proposal: this one stays under the cap
                    break
                batch.append(item)
                size = grown
            self._gathering = []
            await self._flush(batch)

    async def _flush(self, batch: list[tuple[T, int, asyncio.Future]]) -> None:
        """Propose the calls of ``batch`` that still wait (not failed meanwhile: a role that
        went while the window was open; nor given up by their callers)."""
        batch = [call for call in batch if not call[2].done()]
        if not batch:
            return
        items = self._combine([chunk for chunk, _, _ in batch])
        try:
            res = await self._commit(items)
        except Exception as e:  # noqa: BLE001 - every waiter must hear about it
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(e)
            return
        at = 0
        for chunk, _, fut in batch:
            if not fut.done():
                fut.set_result((res, at))
            at += len(chunk)
