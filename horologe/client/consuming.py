"""Consuming as an iterator: the next pull runs while the application handles a message,
and acks go out in the background.

``for m in client.consume("orders", "billing"): handle(m)`` — a message is acked once
the loop asks for the next one (so one that raised, or the last one before ``break``,
is acked only on a clean :meth:`close`, and is otherwise handed out again after its
lease). ``poll(timeout_s)`` hands over what of the pulled batch is due instead (the whole
batch, usually), or ``[]`` once the timeout passes, and acks it on the next call (or on
``close``). Background pullers keep up to ``prefetch`` pulled batches ready and up to
``pulls`` more on their way (fetched or being decoded; their messages are leased
meanwhile): a pull waits for its leases to commit, a Raft round trip, and with several
on their way (``consume`` keeps three) those of one consumer share commits and overlap
their waits; a
background acker sends receipts in groups (what gathers within ``ACK_LINGER_S`` of the
first) from a bounded queue, so a slow ack round trip never holds the loop (at most
``ack_queue`` receipts wait, then the loop waits). A subscription decodes an answer
(on a thread, or in a task, of its own) while the next pull is on its way (a pull of 1,000 spends
about as long being decoded here as being served). A batch handed over whole by ``poll``
is acked by its batch receipts: one short receipt per pull, not one per message. An
error of any of these surfaces in the loop. :meth:`Client.ack` stays for callers that need the
confirmation of each ack. On close, what was pulled and never handed over (prefetched
batches, the rest of the current one, an answer that came in as it stopped) is given
back (``release``): the group's consumers get it again at once, no attempt counted,
rather than after its lease.

A lease runs from its pull, and what was pulled ahead may wait in the subscription longer
than ``visibility_ms`` behind a slow handler (the leases ended, the group's next pull took
the messages again, and the handler ran them twice). So what waits is renewed (``extend``)
each third of the visibility: the batches pulled ahead, and the messages of the current
batch not handed over yet. A message handed over is renewed no more: it has at least two
thirds of the visibility left, and a handler that hangs keeps it no longer than that.

Pulls ask for messages up to ``ahead_ms`` before their time (what the master's wheel has
fired ahead), and the subscription holds each until the master's clock reaches its
``deliver_at`` (horologe/client/holding.py): the round trip is over by then, so a message
reaches the application at its time rather than a pull's round trip after it. Within a
batch, messages are handed over in deliver order.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator

from .holding import MasterClock, by_time, released
from .limits import MAX_AHEAD_MS, MAX_ITEMS
from .models import PulledBatch, ReceivedMessage

log = logging.getLogger(__name__)
# Logged when what a closing subscription gives back fails: it comes back after its lease.
UNDECODED = "an answer pulled as the subscription closed could not be decoded"
NOT_GIVEN_BACK = "could not give back %d messages pulled and not handed out"
NOT_RENEWED = "could not renew the leases of %d messages pulled and not handed out yet"
# How long the acker gathers receipts after the first before it sends them. Nothing waits
# for these acks (the lease keeps a message until its ack commits, close() flushes), and a
# message handed over at its time makes one receipt each: sent at once, 2,000 msg/s due
# made hundreds of ack calls a second, each a Raft entry and a millisecond of the GIL.
ACK_LINGER_S = 0.01
RENEWED_EVERY = 3  # what waits in a subscription is renewed each third of the visibility
# How early consume's pulls take messages: whatever the wheel fired (fire_lead_ms, at most 1,000).
AHEAD_MS = MAX_AHEAD_MS
_DONE = object()


def gather(source: queue.Queue, first, ends: Callable[[object], bool]) -> list:
    """``first`` and what arrives in ``source`` within ``ACK_LINGER_S`` of it: at most
    ``MAX_ITEMS`` items, the last one ``ends`` says closes the group if one came."""
    group = [first]
    until = time.monotonic() + ACK_LINGER_S
    while len(group) < MAX_ITEMS and not ends(group[-1]):
        try:
            group.append(source.get(timeout=max(0.0, until - time.monotonic())))
        except queue.Empty:
            break
    return group


def _drained(q) -> list:
    """What a ``queue.Queue`` or an ``asyncio.Queue`` holds now, taken out."""
    out = []
    while True:
        try:
            out.append(q.get_nowait())
        except (queue.Empty, asyncio.QueueEmpty):
            return out


def fetch_and_decode(
    client, topic: str, group: str, tags, batch: int, wait_ms: int, visibility_ms: int, ahead_ms: int
):
    """A client's pull in two steps, bound to ``client`` (a Client or an AsyncClient, whose
    steps are awaitable): the answer, and its batch."""

    def fetch():
        return client._fetch_pull(topic, group, tags, batch, wait_ms, visibility_ms, ahead_ms)

    def decode(reply):
        return client._pulled(topic, group, tags, reply)

    return fetch, decode


def settle_calls(client, topic: str, group: str, visibility_ms: int):
    """A client's ack, release and renewal (to ``visibility_ms``) of ``group``'s messages
    of ``topic``, bound to ``client`` (a Client or an AsyncClient, whose calls are awaitable)."""

    def ack(receipts: list[str]):
        return client.ack(topic, group, receipts)

    def give_back(receipts: list[str]):
        return client.release(topic, group, receipts)

    def renew(receipts: list[str]):
        return client.extend(topic, group, receipts, visibility_ms)

    return ack, give_back, renew


def _receipts_of(batch) -> list[str]:
    return batch.receipts() if isinstance(batch, PulledBatch) else [m.receipt for m in batch]


def _local_ms() -> float:
    """Local time for holding (MasterClock): monotonic, so a step of this machine's wall
    clock moves no release earlier."""
    return time.monotonic() * 1000


class _Handing:
    """What both subscriptions hand out of ``_current`` (pulled messages in deliver order,
    not handed out yet) and remember to ack; ``_whole``: the batch ``_current`` holds all
    of, while none of it was handed out."""

    _current: deque[ReceivedMessage]
    _whole: list[ReceivedMessage] | None
    _to_ack: list[str]
    clock: MasterClock

    def _init_renewal(self, renew, visibility_ms: int) -> None:
        """``renew(receipts)`` extends leases to ``visibility_ms`` (None: nothing renewed)."""
        self._renew = renew
        self._renew_every_ms = visibility_ms / RENEWED_EVERY
        # id(batch) -> [when its leases last began at the latest (local ms), batch]: pulled,
        # not taken yet (the decoder adds, the iterating loop takes, the renewal reads)
        self._waiting: dict[int, list] = {}
        self._waiting_lock = threading.Lock()
        self._current_from = 0.0  # when the current batch's leases last began, at the latest

    def _pulled(self, batch, sent_ms: float) -> None:
        """``batch`` waits to be taken; its pull was sent at ``sent_ms``, before it leased."""
        with self._waiting_lock:
            self._waiting[id(batch)] = [sent_ms, batch]

    def _due_renewals(self) -> list[list[str]]:
        """The receipts to renew now, a call each: of every waiting batch whose leases began
        a third of the visibility ago, and of the current batch's messages not handed over
        yet, once as long since the last renewal. Taken as renewed from now."""
        now, every, due = _local_ms(), self._renew_every_ms, []
        with self._waiting_lock:
            for entry in self._waiting.values():
                if now - entry[0] >= every:
                    entry[0] = now
                    due.append(_receipts_of(entry[1]))
        if now - self._current_from >= every:
            left = [m.receipt for m in list(self._current)]  # list(): one step, under the GIL
            self._current_from = now
            due += [left[i : i + MAX_ITEMS] for i in range(0, len(left), MAX_ITEMS)]
        return [receipts for receipts in due if receipts]

    def _observe(self, batch, arrived_ms: float) -> None:
        """A pull's answer arrived at ``arrived_ms`` (local): what its stamp says of the
        master's clock."""
        self.clock.observe(getattr(batch, "clock_ms", None), arrived_ms)

    def _take(self, batch: list[ReceivedMessage]) -> list[str]:
        """A pulled batch becomes the current one (``_current`` is empty); its place
        among the ``prefetch`` pulled ahead is free. Its receipts if its leases are to be
        renewed before any of it is handed over (they began a third of the visibility
        ago), else ``[]``."""
        self._slots.release()
        self._current.extend(by_time(batch))
        self._whole = batch
        now = _local_ms()
        with self._waiting_lock:
            self._current_from = self._waiting.pop(id(batch), [now])[0]
        if self._renew is None or now - self._current_from < self._renew_every_ms:
            return []
        self._current_from = now
        return _receipts_of(batch)

    def _wait_s(self) -> float:
        """How long until the next message may be handed over (0: now)."""
        return max(0.0, (self.clock.release_at(self._current[0].deliver_at) - _local_ms()) / 1000)

    def _hand_released(self) -> list[ReceivedMessage]:
        """What the master's clock has reached, of ``_current``: a whole batch is acked by
        its batch receipts, part of one message by message."""
        n = released(self.clock, self._current, _local_ms())
        whole, self._whole = self._whole, None
        if whole is not None and n == len(self._current):
            self._current.clear()
            self._to_ack = _receipts_of(whole)
            return list(whole)
        handed = [self._current.popleft() for _ in range(n)]
        self._to_ack = [m.receipt for m in handed]
        return handed

    def _hand_next(self) -> ReceivedMessage:
        self._whole = None
        m = self._current.popleft()
        self._to_ack = [m.receipt]
        return m

    def _left_over(self, batches: list, answers: list, decode) -> list[str]:
        """Receipts of what was pulled and never handed over: the rest of the current
        batch, the ``batches`` pulled ahead and the ``answers`` not decoded yet (each given
        to ``decode``, which may fail: that answer's leases then end on their own)."""
        left = [m.receipt for m in self._current]
        self._current.clear()
        for batch in batches:
            if isinstance(batch, list):
                left += [m.receipt for m in batch]
        for answer in answers:
            try:
                left += [m.receipt for m in (answer if decode is None else decode(answer))]
            except Exception:  # noqa: BLE001 - its leases end after their time instead
                log.warning(UNDECODED, exc_info=True)
        return left


class Subscription(_Handing, Iterator[ReceivedMessage]):
    """What :meth:`Client.consume` returns: iterate it, and :meth:`close` it (or use ``with``).

    ``pull()`` fetches the next answer, on each of ``pulls`` threads; ``decode(answer)``
    makes it a batch, on another thread (None: the answer is the batch)."""

    def __init__(
        self,
        pull: Callable[[], object],
        ack: Callable[[list[str]], None],
        prefetch: int,
        ack_queue: int,
        decode: Callable[[object], list[ReceivedMessage]] | None = None,
        pulls: int = 1,
        give_back: Callable[[list[str]], object] | None = None,
        renew: Callable[[list[str]], object] | None = None,
        visibility_ms: int = 30_000,
    ) -> None:
        """``renew(receipts)``: extends leases to ``visibility_ms`` (None: what waits is
        not renewed)."""
        self._pull, self._decode, self._ack, self._give_back = pull, decode, ack, give_back
        self._init_renewal(renew, visibility_ms)
        self._late: list = []  # answers that came in once it was stopping (list.append: thread-safe)
        pulls = max(1, pulls)
        self._slots = threading.Semaphore(max(1, prefetch) + pulls)  # pulled ahead, not taken yet
        self._fetched: queue.Queue = queue.Queue(maxsize=1)  # (answer, when it arrived), or an error
        self._batches: queue.Queue = queue.Queue()  # bounded by the slots
        self._receipts: queue.Queue = queue.Queue(maxsize=max(1, ack_queue))
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._current: deque[ReceivedMessage] = deque()
        self._whole: list[ReceivedMessage] | None = None
        self._to_ack: list[str] = []  # receipts of what was handed out, acked when more is asked for
        self.clock = MasterClock()
        self._pullers = [threading.Thread(target=self._pull_loop, daemon=True) for _ in range(pulls)]
        self._decoder = threading.Thread(target=self._decode_loop, daemon=True)
        self._acker = threading.Thread(target=self._ack_loop, daemon=True)
        self._renewer = threading.Thread(target=self._renew_loop, daemon=True)
        for puller in self._pullers:
            puller.start()
        self._decoder.start()
        self._acker.start()
        if renew is not None:
            self._renewer.start()

    def _going(self) -> bool:
        return not self._stop.is_set() and self._error is None

    def _pull_loop(self) -> None:
        try:
            while self._going():
                if not self._slots.acquire(timeout=0.1):
                    continue
                sent_ms = _local_ms()
                answer = self._pull()
                self._hand_on((answer, _local_ms(), sent_ms))
        except BaseException as e:  # noqa: BLE001 - after what was fetched before it
            self._hand_on(e)

    def _hand_on(self, fetched) -> None:
        """Hand a fetched answer (or the error that ended fetching) to the decoder, once
        it has room, unless the subscription stops first."""
        while self._going():
            try:
                self._fetched.put(fetched, timeout=0.1)
                return
            except queue.Full:
                continue
        if not isinstance(fetched, BaseException):
            self._late.append(fetched[0])  # given back on close

    def _decode_loop(self) -> None:
        try:
            while self._going():
                try:
                    fetched = self._fetched.get(timeout=0.1)
                except queue.Empty:
                    continue
                if isinstance(fetched, BaseException):
                    raise fetched
                answer, arrived_ms, sent_ms = fetched
                batch = answer if self._decode is None else self._decode(answer)
                self._observe(batch, arrived_ms)
                if batch:
                    self._pulled(batch, sent_ms)
                    self._batches.put(batch)
                else:
                    self._slots.release()
        except BaseException as e:  # noqa: BLE001 - handed to the iterating thread
            self._error = e  # the puller stops too
            self._batches.put(_DONE)

    def _ack_loop(self) -> None:
        while True:
            first = self._receipts.get()
            if first is _DONE:
                return
            group = gather(self._receipts, first, lambda r: r is _DONE)
            self._send([r for r in group if r is not _DONE])
            if group[-1] is _DONE:
                return

    def _send(self, receipts: list[str]) -> None:
        try:
            self._ack(receipts)
        except BaseException as e:  # noqa: BLE001 - handed to the iterating thread
            self._error = self._error or e
            self._batches.put(_DONE)  # the loop may be waiting for a batch that never comes

    def _renew_loop(self) -> None:
        while not self._stop.wait(self._renew_every_ms / 2000):
            for receipts in self._due_renewals():
                self._renew_now(receipts)

    def _renew_now(self, receipts: list[str]) -> None:
        try:
            self._renew(receipts)
        except Exception:  # noqa: BLE001 - their leases end on their own; a later pull takes them
            log.warning(NOT_RENEWED, len(receipts), exc_info=True)

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    def _ack_handed(self) -> None:
        """The application asks for more: it handled what it was handed."""
        for r in self._to_ack:
            self._receipts.put(r)
        self._to_ack = []

    def _renew_taken(self, batch) -> None:
        receipts = self._take(batch)
        if receipts:
            self._renew_now(receipts)

    def __next__(self) -> ReceivedMessage:
        self._ack_handed()  # first: a failed pull does not undo the handling of the last one
        self._raise_if_failed()
        while not self._current:
            batch = self._batches.get()
            if batch is _DONE:
                self._raise_if_failed()
                raise StopIteration
            self._renew_taken(batch)
        wait = self._wait_s()
        if wait:  # held until the master's clock reaches its time
            time.sleep(wait)
        return self._hand_next()

    def poll(self, timeout_s: float) -> list[ReceivedMessage]:
        """Ack what was handed out before, then return what is pulled already and due, or
        wait up to ``timeout_s`` for the next pulled batch and for its first message's time
        (``[]`` if neither came)."""
        self._ack_handed()  # first, as in __next__
        self._raise_if_failed()
        deadline = time.monotonic() + timeout_s
        if not self._current:
            try:
                batch = self._batches.get(timeout=timeout_s)
            except queue.Empty:
                return []
            if batch is _DONE:
                self._batches.put(_DONE)  # for the next call, too
                self._raise_if_failed()
                return []
            self._renew_taken(batch)
        wait = self._wait_s()
        if wait > deadline - time.monotonic():
            time.sleep(max(0.0, deadline - time.monotonic()))
            return []
        if wait:
            time.sleep(wait)
        return self._hand_released()

    def close(self) -> None:
        """Stop pulling, ack the message last handed out and wait for the acks in flight,
        and for the pulls on their way (up to their ``wait_ms``). What was pulled and never
        handed out is given back: the group gets it again at once."""
        self._ack_handed()
        self._stop.set()
        self._receipts.put(_DONE)
        self._acker.join()
        if self._renewer.is_alive():
            self._renewer.join()
        for puller in self._pullers:
            puller.join()
        self._decoder.join()
        batches = _drained(self._batches)
        answers = [f[0] for f in _drained(self._fetched) if not isinstance(f, BaseException)]
        left = self._left_over(batches, answers + self._late, self._decode)
        if left and self._give_back is not None:
            try:
                self._give_back(left)
            except Exception:  # noqa: BLE001 - they come back after their lease instead
                log.warning(NOT_GIVEN_BACK, len(left), exc_info=True)
        self._raise_if_failed()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, exc_type, *_exc) -> None:
        if exc_type is not None:
            self._to_ack = []  # its handling raised: not acked, it comes back after its lease
        self.close()


class AsyncSubscription(_Handing, AsyncIterator[ReceivedMessage]):
    """What :meth:`AsyncClient.consume` returns: ``async for`` it, and ``await close()``.

    As :class:`Subscription`, with awaitables: ``await decode(answer)`` runs in a task of
    its own while the next ``await pull()`` is on its way (None: the answer is the batch)."""

    def __init__(
        self,
        pull,
        ack,
        prefetch: int,
        ack_queue: int,
        decode=None,
        pulls: int = 1,
        give_back=None,
        renew=None,
        visibility_ms: int = 30_000,
    ) -> None:
        self._pull, self._decode, self._ack, self._give_back = pull, decode, ack, give_back
        self._init_renewal(renew, visibility_ms)
        self._late: list = []  # answers a close cancelled on their way: decoded and given back
        pulls = max(1, pulls)
        self._slots = asyncio.Semaphore(max(1, prefetch) + pulls)  # pulled ahead, not taken yet
        self._fetched: asyncio.Queue = asyncio.Queue(maxsize=1)  # (answer, when it arrived), or an error
        self._batches: asyncio.Queue = asyncio.Queue()  # bounded by the slots
        self._receipts: asyncio.Queue = asyncio.Queue(maxsize=max(1, ack_queue))
        self._current: deque[ReceivedMessage] = deque()
        self._whole: list[ReceivedMessage] | None = None
        self._to_ack: list[str] = []
        self.clock = MasterClock()
        loop = asyncio.get_running_loop()
        self._pullers = [loop.create_task(self._pull_loop()) for _ in range(pulls)]
        self._decoder = loop.create_task(self._decode_loop())
        self._acker = loop.create_task(self._ack_loop())
        self._renewer = None if renew is None else loop.create_task(self._renew_loop())

    async def _pull_loop(self) -> None:
        try:
            while True:
                await self._slots.acquire()
                sent_ms = _local_ms()
                answer = await self._pull()
                try:
                    await self._fetched.put((answer, _local_ms(), sent_ms))
                except asyncio.CancelledError:
                    self._late.append(answer)  # its messages are leased: given back on close
                    raise
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # noqa: BLE001 - after what was fetched before it
            await self._fetched.put(e)

    async def _decode_loop(self) -> None:
        try:
            while True:
                fetched = await self._fetched.get()
                if isinstance(fetched, BaseException):
                    raise fetched
                answer, arrived_ms, sent_ms = fetched
                try:
                    batch = answer if self._decode is None else await self._decode(answer)
                except asyncio.CancelledError:
                    self._late.append(answer)  # as a puller's
                    raise
                self._observe(batch, arrived_ms)
                if batch:
                    self._pulled(batch, sent_ms)
                    self._batches.put_nowait(batch)
                else:
                    self._slots.release()
                    await asyncio.sleep(0)  # an empty pull that did not wait must not hog the loop
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # noqa: BLE001 - handed to the iterating task
            for puller in self._pullers:
                puller.cancel()
            self._batches.put_nowait(e)

    async def _ack_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            group = [await self._receipts.get()]
            until = loop.time() + ACK_LINGER_S
            while len(group) < MAX_ITEMS and group[-1] is not _DONE:
                try:
                    # not wait_for: Python 3.11's can drop a cancel
                    async with asyncio.timeout(max(0.0, until - loop.time())):
                        group.append(await self._receipts.get())
                except TimeoutError:
                    break
            done = _DONE in group
            group = [r for r in group if r is not _DONE]
            if group:
                try:
                    await self._ack(group)
                except asyncio.CancelledError:
                    raise
                except BaseException as e:  # noqa: BLE001 - handed to the iterating task
                    for puller in self._pullers:  # what they would lease nothing could ack
                        puller.cancel()
                    self._batches.put_nowait(e)  # it may be waiting for a batch that never comes
                    while not self._receipts.empty():  # or to put a receipt into a full queue
                        self._receipts.get_nowait()
                    raise
            if done:
                return

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self._renew_every_ms / 2000)
            for receipts in self._due_renewals():
                await self._renew_now(receipts)

    async def _renew_now(self, receipts: list[str]) -> None:
        try:
            await self._renew(receipts)
        except Exception:  # noqa: BLE001 - their leases end on their own; a later pull takes them
            log.warning(NOT_RENEWED, len(receipts), exc_info=True)

    async def _renew_taken(self, batch) -> None:
        receipts = self._take(batch)
        if receipts:
            await self._renew_now(receipts)

    def __aiter__(self) -> AsyncSubscription:
        return self

    async def _ack_handed(self) -> None:
        self._raise_if_acks_failed()
        for r in self._to_ack:
            self._raise_if_acks_failed()  # nothing takes receipts then: a put would wait for ever
            await self._receipts.put(r)
        self._to_ack = []

    def _raise_if_acks_failed(self) -> None:
        """The acker's error, at every call once it failed (as the blocking loop's)."""
        if self._acker.done() and not self._acker.cancelled() and self._acker.exception() is not None:
            raise self._acker.exception()

    async def __anext__(self) -> ReceivedMessage:
        await self._ack_handed()
        while not self._current:
            batch = await self._batches.get()
            if isinstance(batch, BaseException):
                raise batch
            await self._renew_taken(batch)
        wait = self._wait_s()
        if wait:  # held until the master's clock reaches its time
            await asyncio.sleep(wait)
        return self._hand_next()

    async def poll(self, timeout_s: float) -> list[ReceivedMessage]:
        """As :meth:`Subscription.poll`."""
        await self._ack_handed()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if not self._current:
            try:
                async with asyncio.timeout(timeout_s):  # not wait_for: it can drop a cancel
                    batch = await self._batches.get()
            except TimeoutError:
                return []
            if isinstance(batch, BaseException):
                raise batch
            await self._renew_taken(batch)
        wait = self._wait_s()
        if wait > deadline - loop.time():
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            return []
        if wait:
            await asyncio.sleep(wait)
        return self._hand_released()

    async def close(self) -> None:
        """As :meth:`Subscription.close`."""
        for puller in self._pullers:
            puller.cancel()
        self._decoder.cancel()
        if self._renewer is not None:
            self._renewer.cancel()
        await self._ack_handed()
        await self._receipts.put(_DONE)
        await self._acker  # raises an ack's error
        renewer = [] if self._renewer is None else [self._renewer]
        await asyncio.gather(*self._pullers, self._decoder, *renewer, return_exceptions=True)
        batches = _drained(self._batches)
        answers = [f[0] for f in _drained(self._fetched) if not isinstance(f, BaseException)] + self._late
        decoded = []
        for answer in answers:
            try:
                decoded.append(answer if self._decode is None else await self._decode(answer))
            except Exception:  # noqa: BLE001 - its leases end after their time instead
                log.warning(UNDECODED, exc_info=True)
        left = self._left_over(batches + decoded, [], None)
        if left and self._give_back is not None:
            try:
                await self._give_back(left)
            except Exception:  # noqa: BLE001 - they come back after their lease instead
                log.warning(NOT_GIVEN_BACK, len(left), exc_info=True)

    async def __aenter__(self) -> AsyncSubscription:
        return self

    async def __aexit__(self, exc_type, *_exc) -> None:
        if exc_type is not None:
            self._to_ack = []  # as Subscription's
        await self.close()
