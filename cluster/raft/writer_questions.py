"""Questions only the writer can answer: asked on the event loop, answered on the tick thread.

The thread rule (loop_crossing.py) keeps the event loop off the writer: it reads the
committed view the tick thread publishes. The producer-key index (storage/key_index.py)
is not in that view, and a reader of its own over the index's files was weighed and
left out:

- its chain heads are a table of ``key_buckets`` entries (32 MiB at the default) that
  only the writer keeps current, batch by batch; a reader would rebuild its own by
  scanning the whole index from the cleaning cursor, on the event loop, which at 10⁷
  keys holds every request for seconds;
- cleaning unlinks the segments below the cursor and appends their live entries again
  at the end, in the writer's batches; a reader one published state behind can find a
  segment gone mid-walk and would have to retry against a state it has not seen yet.

So a key is looked up where the index lives. :meth:`WriterQuestions.ask` queues the
question (a deque append: no lock, and nothing the tick thread holds) and wakes the tick
thread; :meth:`WriterQuestions.answer_all`, a tick callback, answers every queued
question between applies, when no batch is open and the writer's index is current, and
posts each answer through the :class:`LoopCrossing`. The crossing runs posts in order,
so an answer reaches the loop after the ``Applied`` of every entry applied before it
was computed: the committed view has followed at least the state that answered. The
loop awaits the answer with a timeout and never blocks; a question that raises is
answered with its exception (a tick callback must never raise: pysyncobj would log and
retry the whole tick). An answer whose asker stopped waiting is dropped; a question that
makes something for its asker (a backup's links) comes with an ``undo``, queued behind it
then, so that the tick thread removes what nobody holds.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..errors import WriterTimeoutError
from .loop_crossing import LoopCrossing, settle, within

log = logging.getLogger(__name__)

T = TypeVar("T")
W = TypeVar("W")


class WriterQuestions:
    def __init__(self, crossing: LoopCrossing, wake: Callable[[], None] = lambda: None) -> None:
        """``wake()`` (any thread) makes the tick thread run its callbacks soon."""
        self._crossing = crossing
        self._wake = wake
        # (question, future; None for an action told): appended on the loop, popped on the
        # tick thread (both atomic)
        self._asked: collections.deque[tuple[Callable[[Any], Any], asyncio.Future | None]]
        self._asked = collections.deque()

    def ask(
        self, question: Callable[[W], T], timeout_s: float, undo: Callable[[W], object] | None = None
    ) -> Awaitable[T]:
        """On the loop: ``question(writer)``'s answer, computed on the tick thread.

        ``undo(writer)`` is for a question that makes something on the writer's side for
        its asker (a backup's links): it runs on the tick thread, after the question, when
        the answer does not reach the asker (its wait timed out or was cancelled, before
        the answer came or after; or the question raised), so nothing is left that nobody
        holds. It must do nothing where the question made nothing."""
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._asked.append((question, fut))
        self._wake()
        why = f"the writer did not answer within {timeout_s:g} s"
        waited = within(fut, timeout_s, WriterTimeoutError, why)
        return waited if undo is None else self._taken_or_undone(waited, undo)

    async def _taken_or_undone(self, waited: Awaitable[T], undo: Callable[[W], object]) -> T:
        try:
            return await waited
        except BaseException:
            self.tell(undo)  # queued after the question: it runs once the question has
            raise

    def tell(self, action: Callable[[W], object]) -> None:
        """On the loop: run ``action(writer)`` on the tick thread, between applies; nothing
        waits for it, and what it raises is logged there."""
        self._asked.append((action, None))
        self._wake()

    def answer_all(self, writer: Any) -> None:
        """On the tick thread, between applies: answer every question asked so far."""
        while self._asked:
            question, fut = self._asked.popleft()
            try:
                answer, error = question(writer), None
            except Exception as e:  # noqa: BLE001 - handed to the asker, never raised on the tick thread
                answer, error = None, e
            if fut is not None:
                self._crossing.post(settle, fut, answer, error)
            elif error is not None:
                log.error("an action told to the writer failed: %r", error)
