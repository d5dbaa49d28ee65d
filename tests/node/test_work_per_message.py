"""The Python work each message costs on the paths every message takes, counted.

A step is run on a batch of 1,000 messages and on one of 2,000, each on a fresh store,
with ``sys.settrace`` counting the lines run and the Python calls made and
``sys.setprofile`` the calls into C (numpy, msgpack, builtins); the difference over
1,000 is what one more message costs, with every fixed cost cancelled. These are
counts, not times: the same code on the same Python gives the same counts on any
machine, busy or not.

Each bound is what the code does now and one more of each (docs/benchmarks.md, "What
guards the figures"). A change that makes a message cost more fails here with the
numbers; raise a bound only with a same-run A/B at the edge (``python -m bench``) that
shows the figure did not move. A pull that looked up each message's hand-out count on
its own (before 270ada5) took consume down by a third and no test saw it; here its pull
costs 22 lines and 10 Python calls a message, and fails.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import msgpack
import pytest

from horologe.client import pull_columns
from horologe.client.core import batch_bodies
from horologe.cluster import PRODUCE, SYNC
from horologe.node.consumers.wire import as_columns
from horologe.node.http.rules.plain_batch import plain_batch
from horologe.storage import MessageLimits
from horologe.wheel import ALL, Watermark

from .local_log import LocalLog
from .test_consumers_scan import T, consumers_over

SMALL, LARGE = 1_000, 2_000
VISIBILITY_MS = 30_000


@dataclass(frozen=True)
class Work:
    """Lines run, Python calls and calls into C."""

    lines: float
    calls: float
    c_calls: float

    def __sub__(self, other: Work) -> Work:
        return Work(self.lines - other.lines, self.calls - other.calls, self.c_calls - other.c_calls)

    def per(self, n: int) -> Work:
        return Work(self.lines / n, self.calls / n, self.c_calls / n)


class _Counting:
    """Counts what runs on this thread while it is entered (the collector held off: what
    it runs depends on what ran before)."""

    def __init__(self) -> None:
        self.lines = self.calls = self.c_calls = 0

    def _trace(self, frame, event, arg):
        if event == "line":
            self.lines += 1
        elif event == "call":
            self.calls += 1
        return self._trace

    def _profile(self, frame, event, arg):
        if event == "c_call":
            self.c_calls += 1

    def __enter__(self) -> _Counting:
        # What ran before (a coverage tool's tracer, say) is put back after.
        self._before = sys.gettrace(), sys.getprofile(), gc.isenabled()
        gc.disable()
        sys.settrace(self._trace)
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc) -> None:
        trace, profile, collecting = self._before
        sys.settrace(trace)
        sys.setprofile(profile)
        if collecting:
            gc.enable()

    def work(self) -> Work:
        return Work(self.lines, self.calls, self.c_calls)


Step = Callable[[], Awaitable[object]]


class Scene:
    """A fresh store with ``n`` messages of one topic produced as the SDK sends them;
    ``counted(step)`` runs a step under the counters."""

    def __init__(self, directory: str, n: int) -> None:
        self.n = n
        self.now = [T]
        self.log = LocalLog(directory, lambda: self.now[0])
        self.log.now = self.now
        self.items = [{"topic": "t", "body": b"m%06d" % i, "deliver_at": T} for i in range(n)]
        self.body = msgpack.packb({"messages": batch_bodies(self.items)}, use_bin_type=True)
        self.work: Work | None = None

    def decoded(self):
        cols = plain_batch(self.body, True, T - 1, MessageLimits(), 10_000)
        assert cols is not None and len(cols) == self.n  # every item plain: the fast path
        return cols

    def due(self) -> None:
        """The watermark past the messages' time, as the wheel moves it."""
        self.now[0] = T + 1
        self.log.ws = lambda: Watermark(T, ALL)

    async def counted(self, step: Step):
        with _Counting() as c:
            out = await step()
        self.work = c.work()
        return out

    def close(self) -> None:
        self.log.close()


async def _client_batch(s: Scene) -> None:
    async def step():
        return msgpack.packb({"messages": batch_bodies(s.items)}, use_bin_type=True)

    await s.counted(step)


async def _node_decode(s: Scene) -> None:
    async def step():
        return s.decoded()

    await s.counted(step)


async def _apply_later(s: Scene) -> None:
    cols = s.decoded()
    await s.counted(lambda: s.log.propose(PRODUCE, messages=cols))
    assert s.log.applied[-1].stored.sum() == s.n


async def _apply_due(s: Scene) -> None:
    cols = s.decoded()
    s.due()
    await s.counted(lambda: s.log.propose(PRODUCE, messages=cols))
    assert s.log.applied[-1].delivered == s.n


async def _wheel_fires(s: Scene) -> None:
    await s.log.propose(PRODUCE, messages=s.decoded())
    s.due()
    await s.counted(lambda: s.log.propose(SYNC))
    assert s.log.applied[-1].delivered == s.n


async def _delivered(s: Scene):
    """``s``'s messages delivered, handed out once and their leases ended (a pull looks
    up earlier hand-outs), and consumers over the view."""
    await s.log.propose(PRODUCE, messages=s.decoded())
    s.due()
    await s.log.propose(SYNC)
    consumers = consumers_over(s.log)
    first = await consumers.pull("g", "t", None, s.n, 0, VISIBILITY_MS)
    assert len(first.taken) == s.n
    s.now[0] += VISIBILITY_MS + 1
    return consumers


async def _pull(s: Scene) -> None:
    consumers = await _delivered(s)

    async def step():
        return as_columns(await consumers.pull("g", "t", None, s.n, 0, VISIBILITY_MS), s.now[0])

    pulled = pull_columns.decode(await s.counted(step))
    assert [m.deliveries for m in pulled.messages] == [2] * s.n


async def _client_decode(s: Scene) -> None:
    consumers = await _delivered(s)
    raw = as_columns(await consumers.pull("g", "t", None, s.n, 0, VISIBILITY_MS), s.now[0])

    async def step():
        return pull_columns.decode(raw)

    assert len((await s.counted(step)).messages) == s.n


async def _ack_batch(s: Scene) -> None:
    consumers = await _delivered(s)
    pulled = await consumers.pull("g", "t", None, s.n, 0, VISIBILITY_MS)
    assert await s.counted(lambda: consumers.ack("g", "t", pulled.batch_receipts)) == s.n


async def _ack_each(s: Scene) -> None:
    consumers = await _delivered(s)
    pulled = await consumers.pull("g", "t", None, s.n, 0, VISIBILITY_MS)
    assert await s.counted(lambda: consumers.ack("g", "t", pulled.receipts)) == s.n


# step: (what runs it, the most lines, Python calls and C calls a message may cost)
BOUNDS: dict[str, tuple[Callable[[Scene], Awaitable[None]], Work]] = {
    "the SDK builds a batch": (_client_batch, Work(17, 3, 9)),
    "the master decodes the batch": (_node_decode, Work(10, 3, 2)),
    "a produce applied, due later": (_apply_later, Work(21, 5, 8)),
    "a produce applied, due already": (_apply_due, Work(28, 6, 10)),
    "the wheel fires them": (_wheel_fires, Work(1, 1, 1)),
    "a pull answered by columns": (_pull, Work(11, 2, 3)),
    "the SDK decodes the pull": (_client_decode, Work(7, 1, 2)),
    "an ack of the pull's batch receipt": (_ack_batch, Work(3, 1, 2)),
    "an ack of each message's receipt": (_ack_each, Work(28, 3, 14)),
}


def work_per_message(scene: Callable[[Scene], Awaitable[None]], directory) -> Work:
    """What one more message costs ``scene``'s step: its work on LARGE messages less its
    work on SMALL, over the difference (each run once before, on its own store, so that
    first-use costs such as imports and caches fall outside)."""

    def run(n: int, name: str) -> Work:
        s = Scene(str(directory / name), n)
        try:
            asyncio.run(scene(s))
        finally:
            s.close()
        assert s.work is not None
        return s.work

    run(SMALL, "warm-small")
    run(LARGE, "warm-large")
    return (run(LARGE, "large") - run(SMALL, "small")).per(LARGE - SMALL)


@pytest.mark.parametrize("step", list(BOUNDS))
def test_a_message_costs_no_more_python_work_than_it_does(step, tmp_path):
    scene, bound = BOUNDS[step]
    got = work_per_message(scene, tmp_path)
    over = {f: getattr(got, f) for f in ("lines", "calls", "c_calls") if getattr(got, f) > getattr(bound, f)}
    assert not over, f"{step}: a message now costs {got}, more than {bound} ({', '.join(over)})"
