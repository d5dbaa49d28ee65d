"""cluster/raft/writer_questions.py: a question asked on the loop is answered on another thread
(the tick thread's part), after what that thread posted before, and the loop never blocks."""

from __future__ import annotations

import asyncio
import threading

import pytest

from horologe.cluster.errors import WriterTimeoutError
from horologe.cluster.raft.loop_crossing import LoopCrossing
from horologe.cluster.raft.writer_questions import WriterQuestions


class TickThread(threading.Thread):
    """Stands for pysyncobj's tick thread: on each wake-up, posts an "applied" mark, then
    answers every question asked; ``writer`` is what the questions are asked of."""

    def __init__(self, crossing: LoopCrossing, writer: dict, applied: list[int]) -> None:
        super().__init__(daemon=True)
        self.crossing, self.writer, self.applied = crossing, writer, applied
        self.questions = WriterQuestions(crossing, self.wake)
        self.woken = threading.Event()
        self.halt = False
        self.threads: set[int] = set()

    def wake(self) -> None:
        self.woken.set()

    def run(self) -> None:
        while not self.halt:
            self.woken.wait(1)
            self.woken.clear()
            self.writer["index"] += 1  # an entry applied, and published before the answers
            self.crossing.post(self.applied.append, self.writer["index"])
            self.threads.add(threading.get_ident())
            self.questions.answer_all(self.writer)


@pytest.fixture
async def tick():
    applied: list[int] = []
    t = TickThread(LoopCrossing(asyncio.get_running_loop()), {"index": 0}, applied)
    t.start()
    yield t
    t.halt = True
    t.wake()
    t.join(5)


async def test_the_answer_comes_from_the_tick_thread_after_what_it_posted_before(tick):
    asked_on = threading.get_ident()
    seen = await tick.questions.ask(lambda w: (w["index"], threading.get_ident()), 5)
    index, answered_on = seen
    assert answered_on != asked_on and answered_on in tick.threads
    assert tick.applied and tick.applied[-1] >= index  # the loop saw that state before the answer


async def test_many_questions_each_get_their_own_answer(tick):
    answers = await asyncio.gather(*(tick.questions.ask(lambda w, k=k: k * 10, 5) for k in range(50)))
    assert answers == [k * 10 for k in range(50)]


async def test_a_question_that_raises_answers_with_its_error_and_the_thread_goes_on(tick):
    def bad(_w):
        raise KeyError("no such thing")

    with pytest.raises(KeyError):
        await tick.questions.ask(bad, 5)
    assert await tick.questions.ask(lambda w: "still here", 5) == "still here"


async def test_an_action_told_runs_on_the_tick_thread_and_what_it_raises_is_logged_there(tick, caplog):
    ran_on: list[int] = []

    def bad(_w):
        raise KeyError("no such thing")

    tick.questions.tell(lambda w: ran_on.append(threading.get_ident()))
    tick.questions.tell(bad)
    assert await tick.questions.ask(lambda w: "still here", 5) == "still here"  # answered after both
    assert ran_on and ran_on[0] in tick.threads and ran_on[0] != threading.get_ident()
    assert "an action told to the writer failed: KeyError('no such thing')" in caplog.text


async def test_a_writer_that_does_not_answer_times_out_without_blocking_the_loop():
    crossing = LoopCrossing(asyncio.get_running_loop())
    questions = WriterQuestions(crossing)  # no tick thread answers
    ticks = 0

    async def other_work() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    worker = asyncio.create_task(other_work())
    with pytest.raises(WriterTimeoutError):
        await questions.ask(lambda w: 1, 0.3)
    worker.cancel()
    assert ticks >= 2  # the loop went on meanwhile
    # answered late (the asker gave up): dropped, not raised on the loop
    questions.answer_all({})
    await asyncio.sleep(0.05)


async def test_what_a_question_made_is_undone_after_it_when_the_answer_does_not_reach_the_asker():
    questions = WriterQuestions(LoopCrossing(asyncio.get_running_loop()))  # answered by hand
    done: list[str] = []

    def made(name: str):
        return lambda w: done.append(f"made {name}") or name

    def undone(name: str):
        return lambda w: done.append(f"undone {name}")

    given_up = asyncio.ensure_future(questions.ask(made("a"), 5, undo=undone("a")))
    taken = asyncio.ensure_future(questions.ask(made("b"), 5, undo=undone("b")))
    await asyncio.sleep(0)  # both asked
    given_up.cancel()
    with pytest.raises(asyncio.CancelledError):
        await given_up
    questions.answer_all({})
    assert await taken == "b"
    questions.answer_all({})
    assert done == ["made a", "made b", "undone a"]
