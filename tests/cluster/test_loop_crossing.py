"""The one way from the tick thread to the loop (cluster/raft/loop_crossing.py): posts run
on the loop in the order posted, and posts made before the loop took the last ones share
one wake-up."""

from __future__ import annotations

import asyncio
import threading

import pytest

from horologe.cluster.raft.loop_crossing import LoopCrossing


def _counting_wakeups(loop: asyncio.AbstractEventLoop) -> list[int]:
    woken = [0]
    real = loop.call_soon_threadsafe

    def counted(*args, **kwargs):
        woken[0] += 1
        return real(*args, **kwargs)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
    return woken


def _on_another_thread(fn) -> None:
    t = threading.Thread(target=fn)
    t.start()
    t.join()


async def test_posts_made_before_the_loop_runs_share_one_wakeup_and_keep_their_order():
    loop = asyncio.get_running_loop()
    woken = _counting_wakeups(loop)
    crossing = LoopCrossing(loop)
    ran: list[int] = []
    _on_another_thread(lambda: [crossing.post(ran.append, i) for i in range(3)])
    await asyncio.sleep(0)
    assert (ran, woken[0]) == ([0, 1, 2], 1)
    _on_another_thread(lambda: crossing.post(ran.append, 3))  # after the drain: wakes again
    await asyncio.sleep(0)
    assert (ran, woken[0]) == ([0, 1, 2, 3], 2)


@pytest.mark.parametrize("error", [ValueError, asyncio.CancelledError])
async def test_a_post_that_raises_is_reported_and_the_rest_still_run(error):
    """As the loop does for a callback of its own, a CancelledError included."""
    loop = asyncio.get_running_loop()
    reported: list[dict] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    crossing = LoopCrossing(loop)
    ran: list[str] = []

    def fails() -> None:
        raise error

    _on_another_thread(
        lambda: (crossing.post(ran.append, "a"), crossing.post(fails), crossing.post(ran.append, "b"))
    )
    await asyncio.sleep(0)
    assert ran == ["a", "b"]
    assert [type(c["exception"]) for c in reported] == [error]


async def test_a_drain_runs_only_what_was_posted_before_it_began():
    """What is posted while a drain runs waits for the next drain, behind the loop's other
    callbacks: a tick thread posting all along (a catch-up) must not hold the loop."""
    loop = asyncio.get_running_loop()
    crossing = LoopCrossing(loop)
    ran: list[str] = []

    def first() -> None:
        ran.append("first")
        loop.call_soon(ran.append, "the loop's own")
        crossing.post(ran.append, "posted meanwhile")

    _on_another_thread(lambda: crossing.post(first))
    for _ in range(3):
        await asyncio.sleep(0)
    assert ran == ["first", "the loop's own", "posted meanwhile"]
