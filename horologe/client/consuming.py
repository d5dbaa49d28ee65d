"""Consuming as an iterator: the next pull runs while the application handles a message,
and acks go out in the background.

``for m in client.consume("orders", "billing"): handle(m)`` — a message is acked once
the loop asks for the next one (so one that raised, or the last one before ``break``,
is acked only on a clean :meth:`close`, and is otherwise handed out again after its
lease). ``poll(timeout_s)`` hands over a whole pulled batch instead, or ``[]`` once the
timeout passes, and acks it on the next call (or on ``close``). A background puller
keeps up to ``prefetch`` pulled batches ready; a background acker sends receipts in
groups from a bounded queue, so a slow ack round trip never holds the loop (at most
``ack_queue`` receipts wait, then the loop waits). A batch handed over whole by ``poll``
is acked by its batch receipts: one short receipt per pull, not one per message. Errors
of either surface in the loop. :meth:`Client.ack` stays for callers that need the
confirmation of each ack.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator

from .models import PulledBatch, ReceivedMessage

ACK_GROUP = 1000  # receipts per ack call at most (the API's limit)
_DONE = object()


def pull_and_ack(client, topic: str, group: str, tags, batch: int, wait_ms: int, visibility_ms: int):
    """The two calls a subscription makes, bound to ``client`` (a Client or an AsyncClient)."""

    def pull():
        return client.pull(topic, group, tags=tags, max=batch, wait_ms=wait_ms, visibility_ms=visibility_ms)

    def ack(receipts: list[str]):
        return client.ack(topic, group, receipts)

    return pull, ack


class _Handing:
    """What both subscriptions hand out of ``_current`` and remember to ack."""

    _current: deque[ReceivedMessage]
    _to_ack: list[str]

    def _hand_whole(self, batch: list[ReceivedMessage]) -> list[ReceivedMessage]:
        """A pulled batch, none of it handed out yet: acked by its batch receipts."""
        self._to_ack = batch.receipts() if isinstance(batch, PulledBatch) else [m.receipt for m in batch]
        return list(batch)

    def _hand_rest(self) -> list[ReceivedMessage]:
        """What is left of a batch that ``next`` handed out from: acked one by one."""
        handed = list(self._current)
        self._current.clear()
        self._to_ack = [m.receipt for m in handed]
        return handed


class Subscription(_Handing, Iterator[ReceivedMessage]):
    """What :meth:`Client.consume` returns: iterate it, and :meth:`close` it (or use ``with``)."""

    def __init__(
        self,
        pull: Callable[[], list[ReceivedMessage]],
        ack: Callable[[list[str]], None],
        prefetch: int,
        ack_queue: int,
    ) -> None:
        self._pull, self._ack = pull, ack
        self._batches: queue.Queue = queue.Queue(maxsize=max(1, prefetch))
        self._receipts: queue.Queue = queue.Queue(maxsize=max(1, ack_queue))
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._current: deque[ReceivedMessage] = deque()
        self._to_ack: list[str] = []  # receipts of what was handed out, acked when more is asked for
        self._puller = threading.Thread(target=self._pull_loop, daemon=True)
        self._acker = threading.Thread(target=self._ack_loop, daemon=True)
        self._puller.start()
        self._acker.start()

    def _pull_loop(self) -> None:
        try:
            while not self._stop.is_set():
                batch = self._pull()
                while batch and not self._stop.is_set():
                    try:
                        self._batches.put(batch, timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except BaseException as e:  # noqa: BLE001 - handed to the iterating thread
            self._error = e
            self._batches.put(_DONE)

    def _ack_loop(self) -> None:
        while True:
            first = self._receipts.get()
            if first is _DONE:
                return
            group = [first]
            while len(group) < ACK_GROUP:
                try:
                    nxt = self._receipts.get_nowait()
                except queue.Empty:
                    break
                if nxt is _DONE:
                    self._send(group)
                    return
                group.append(nxt)
            self._send(group)

    def _send(self, receipts: list[str]) -> None:
        try:
            self._ack(receipts)
        except BaseException as e:  # noqa: BLE001 - handed to the iterating thread
            self._error = self._error or e

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    def _ack_handed(self) -> None:
        """The application asks for more: it handled what it was handed."""
        for r in self._to_ack:
            self._receipts.put(r)
        self._to_ack = []

    def __next__(self) -> ReceivedMessage:
        self._raise_if_failed()
        self._ack_handed()
        while not self._current:
            batch = self._batches.get()
            if batch is _DONE:
                self._raise_if_failed()
                raise StopIteration
            self._current.extend(batch)
        m = self._current.popleft()
        self._to_ack = [m.receipt]
        return m

    def poll(self, timeout_s: float) -> list[ReceivedMessage]:
        """Ack what was handed out before, then return what is pulled already, or wait up
        to ``timeout_s`` for the next pulled batch (``[]`` if none came)."""
        self._raise_if_failed()
        self._ack_handed()
        if not self._current:
            try:
                batch = self._batches.get(timeout=timeout_s)
            except queue.Empty:
                return []
            if batch is _DONE:
                self._batches.put(_DONE)  # for the next call, too
                self._raise_if_failed()
                return []
            return self._hand_whole(batch)
        return self._hand_rest()

    def close(self) -> None:
        """Stop pulling, ack the message last handed out and wait for the acks in flight.
        Prefetched messages not handed out are not acked: they come back after their lease."""
        self._ack_handed()
        self._stop.set()
        self._receipts.put(_DONE)
        self._acker.join()
        self._puller.join()
        self._raise_if_failed()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncSubscription(_Handing, AsyncIterator[ReceivedMessage]):
    """What :meth:`AsyncClient.consume` returns: ``async for`` it, and ``await close()``."""

    def __init__(self, pull, ack, prefetch: int, ack_queue: int) -> None:
        self._pull, self._ack = pull, ack
        self._batches: asyncio.Queue = asyncio.Queue(maxsize=max(1, prefetch))
        self._receipts: asyncio.Queue = asyncio.Queue(maxsize=max(1, ack_queue))
        self._current: deque[ReceivedMessage] = deque()
        self._to_ack: list[str] = []
        self._puller = asyncio.get_running_loop().create_task(self._pull_loop())
        self._acker = asyncio.get_running_loop().create_task(self._ack_loop())

    async def _pull_loop(self) -> None:
        try:
            while True:
                batch = await self._pull()
                if batch:
                    await self._batches.put(batch)
                else:
                    await asyncio.sleep(0)  # an empty pull that did not wait must not hog the loop
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # noqa: BLE001 - handed to the iterating task
            await self._batches.put(e)

    async def _ack_loop(self) -> None:
        while True:
            group = [await self._receipts.get()]
            while len(group) < ACK_GROUP and not self._receipts.empty():
                group.append(self._receipts.get_nowait())
            done = _DONE in group
            group = [r for r in group if r is not _DONE]
            if group:
                await self._ack(group)
            if done:
                return

    def __aiter__(self) -> AsyncSubscription:
        return self

    async def _ack_handed(self) -> None:
        if self._acker.done() and self._acker.exception() is not None:
            raise self._acker.exception()
        for r in self._to_ack:
            await self._receipts.put(r)
        self._to_ack = []

    async def __anext__(self) -> ReceivedMessage:
        await self._ack_handed()
        while not self._current:
            batch = await self._batches.get()
            if isinstance(batch, BaseException):
                raise batch
            self._current.extend(batch)
        m = self._current.popleft()
        self._to_ack = [m.receipt]
        return m

    async def poll(self, timeout_s: float) -> list[ReceivedMessage]:
        """As :meth:`Subscription.poll`."""
        await self._ack_handed()
        if not self._current:
            try:
                batch = await asyncio.wait_for(self._batches.get(), timeout_s)
            except TimeoutError:
                return []
            if isinstance(batch, BaseException):
                raise batch
            return self._hand_whole(batch)
        return self._hand_rest()

    async def close(self) -> None:
        """As :meth:`Subscription.close`."""
        self._puller.cancel()
        await self._ack_handed()
        await self._receipts.put(_DONE)
        await self._acker  # raises an ack's error
        await asyncio.gather(self._puller, return_exceptions=True)

    async def __aenter__(self) -> AsyncSubscription:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
