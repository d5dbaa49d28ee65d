"""The thread rule of a node, and the one way across it.

Two threads run a node:

- **pysyncobj's tick thread owns the writer**: the :class:`~horologe.storage.Storage`
  and the :class:`~horologe.cluster.state_machine.StateMachine`. It applies every
  entry (fsyncs included), writes and installs snapshots. Nothing else writes the
  store, and nothing else reads the writer while the node runs.
- **The asyncio event loop owns everything else**: the
  :class:`~horologe.storage.store_reader.StoreReader` and the committed view built on
  it, the wheel, leases, group commits and HTTP handlers. It takes no lock the tick
  thread holds, so it never waits on an fsync.

Everything the tick thread tells the loop (an applied entry with the state it
committed, a proposal's outcome, a change of role, a transfer's result) goes through
:meth:`LoopCrossing.post`, which queues it on the loop in the order it was posted.
Posts made before the loop took the last ones share one wake-up of the loop: each
``call_soon_threadsafe`` writes to the loop's self-pipe, and the write hands the GIL to
the loop while the tick thread is still busy (an applied produce posts its entry and its
proposal's outcome, one after the other).

Enforced: :meth:`LoopCrossing.require_off_loop` is called where the writer is used
(``RaftNode.apply_entry``), and a ``StoreReader`` refuses to follow states on a second
thread.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class LoopCrossing:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        """Made on the loop's own thread."""
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._posted: collections.deque[tuple[Callable[..., Any], tuple]] = collections.deque()
        self._woken = False  # a drain is queued on the loop and has not begun taking

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop, after everything posted before; dropped once it closed."""
        if self._loop.is_closed():
            return
        self._posted.append((fn, args))  # before the flag is read: a drain that began takes it
        if self._woken:
            return
        self._woken = True
        try:
            self._loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # closed between the check and the call
            pass

    def _drain(self) -> None:  # on the loop
        self._woken = False  # before taking: a post after this wakes the loop again
        posted = self._posted
        # Only what is here now: what the tick thread posts meanwhile comes with the drain
        # it queues, after the loop's other callbacks (a catch-up posting all along must
        # not hold the loop in one drain).
        for _ in range(len(posted)):
            fn, args = posted.popleft()
            try:
                fn(*args)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as e:  # noqa: BLE001 - as the loop does for a callback of its own
                self._loop.call_exception_handler(
                    {"message": f"Exception in a callback posted by the tick thread: {fn!r}", "exception": e}
                )

    def require_off_loop(self, what: str) -> None:
        if threading.get_ident() == self._loop_thread:
            raise RuntimeError(f"{what} runs on the tick thread, never on the event loop")


def settle(fut: asyncio.Future, result: Any = None, error: BaseException | None = None) -> None:
    """On the loop: ``fut``'s outcome, unless it has one already (its waiter gave up: a timeout)."""
    if fut.done():
        return
    if error is None:
        fut.set_result(result)
    else:
        fut.set_exception(error)


async def within(fut: Awaitable[T], timeout_s: float, error: type[Exception], why: str) -> T:
    """``fut``'s result, or ``error(why)`` once ``timeout_s`` passed first."""
    try:
        async with asyncio.timeout(timeout_s):  # not wait_for: Python 3.11's can drop a cancel
            return await fut
    except TimeoutError as e:
        raise error(why) from e
