"""A master that may not serve for a moment holds a request until it may
(node/master_hold.py), behind every route with the master rule (node/http/route_table.py).

The clock is virtual (virtual_time.py): what these tests say about *when* holds anywhere.
"""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from horologe.cluster import NotMasterError
from horologe.node.http.common import SERVICE
from horologe.node.http.route_table import on_master
from horologe.node.master_hold import MasterHold

from .virtual_time import VirtualLoop

HOLD_S = 0.3
NEXT = "http://127.0.0.1:8082"


class _Master:
    """A node that leads until ``leads_until`` (then ``next_leader`` leads, or nobody known),
    and may serve from ``serves_from`` on (its lease back), on the loop's clock."""

    def __init__(self, serves_from: float, leads_until: float = float("inf"), next_leader: str | None = None):
        self.serves_from = serves_from
        self.leads_until = leads_until
        self.next_leader = next_leader
        self.checks = 0
        self.hold = MasterHold(self.require_master, self.leads, HOLD_S)

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def leads(self) -> bool:
        return self._now() < self.leads_until

    def require_master(self) -> None:
        self.checks += 1
        if not self.leads():
            raise NotMasterError(self.next_leader)
        if self._now() < self.serves_from:
            raise NotMasterError(None)  # the lease lapsed, say


def _call(node: _Master, at: float = 0.0) -> tuple[str, float]:
    """A request arriving at ``at`` (virtual s) through the master check: how it ended, when."""
    app = web.Application()
    app[SERVICE] = node

    async def handler(_request) -> web.Response:
        return web.Response(text="served")

    gated = on_master(handler)

    async def call() -> tuple[str, float]:
        await asyncio.sleep(at)
        request = make_mocked_request("POST", "/v1/messages", app=app)
        loop = asyncio.get_running_loop()
        try:
            await gated(request)
        except NotMasterError as e:
            return f"refused, leader {e.leader}", loop.time()
        return "served", loop.time()

    return VirtualLoop().run(call())


def test_a_master_whose_lease_lapsed_for_a_moment_serves_the_request_once_it_is_back():
    node = _Master(serves_from=0.12)
    outcome, at = _call(node)
    assert outcome == "served"
    assert 0.12 <= at < 0.12 + 0.011  # looked again every 10 ms
    assert node.hold.counts == {"served": 1, "redirected": 0, "refused": 0}


def test_a_master_that_may_serve_is_not_held():
    node = _Master(serves_from=0.0)
    assert _call(node, at=0.5) == ("served", 0.5)
    assert node.checks == 1
    assert node.hold.counts == {"served": 0, "redirected": 0, "refused": 0}


def test_a_master_that_may_not_serve_for_the_whole_hold_refuses_when_it_ends():
    node = _Master(serves_from=10.0)
    outcome, at = _call(node)
    assert outcome == "refused, leader None"
    assert at == pytest.approx(HOLD_S, abs=1e-5)
    assert node.hold.counts == {"served": 0, "redirected": 0, "refused": 1}


def test_a_held_request_is_redirected_as_soon_as_another_node_leads():
    node = _Master(serves_from=10.0, leads_until=0.05, next_leader=NEXT)
    outcome, at = _call(node)
    assert outcome == f"refused, leader {NEXT}"
    assert 0.05 <= at < 0.061
    assert node.hold.counts == {"served": 0, "redirected": 1, "refused": 0}


def test_a_held_request_is_refused_as_soon_as_the_node_leads_no_more_and_knows_no_leader():
    node = _Master(serves_from=10.0, leads_until=0.05)
    outcome, at = _call(node)
    assert outcome == "refused, leader None"
    assert 0.05 <= at < 0.061


def test_a_follower_refuses_at_once():
    """A 307, or a 503 from a node that leads no more: the client tries another node now."""
    for next_leader in (NEXT, None):
        node = _Master(serves_from=0.0, leads_until=0.0, next_leader=next_leader)
        assert _call(node) == (f"refused, leader {next_leader}", 0.0)
        assert node.checks == 1


class _Lapsing(_Master):
    """A master whose lease lapses from ``lapse[0]`` to ``lapse[1]`` (virtual s)."""

    def __init__(self, lapse: tuple[float, float], **kw) -> None:
        super().__init__(serves_from=0.0, **kw)
        self.lapse = lapse

    def require_master(self) -> None:
        super().require_master()
        if self.lapse[0] <= self._now() < self.lapse[1]:
            raise NotMasterError(None)


def _long_poll(node: _Master, wakes: tuple[float, ...]) -> tuple[str, float, list[float]]:
    """A long poll through ``node.hold.through``, which checks the master each time it wakes
    (at ``wakes``, virtual s), as a pull does: how it ended, when, and when it was made."""
    made: list[float] = []

    async def poll() -> str:
        loop = asyncio.get_running_loop()
        made.append(loop.time())
        for at in wakes:
            if at > loop.time():
                await asyncio.sleep(at - loop.time())
                node.require_master()
        return "answered"

    async def call() -> tuple[str, float, list[float]]:
        loop = asyncio.get_running_loop()
        try:
            outcome = await node.hold.through(poll)
        except NotMasterError as e:
            outcome = f"refused, leader {e.leader}"
        return outcome, loop.time(), made

    return VirtualLoop().run(call())


def test_a_long_poll_whose_master_may_not_serve_for_a_moment_is_held_then_polls_on():
    node = _Lapsing(lapse=(1.0, 1.12))
    outcome, at, made = _long_poll(node, wakes=(1.0, 2.0))
    assert outcome == "answered" and at == pytest.approx(2.0, abs=1e-5)
    assert made[0] == 0.0 and 1.12 <= made[1] < 1.12 + 0.011  # polled again once it may serve
    assert node.hold.counts == {"served": 1, "redirected": 0, "refused": 0}


def test_a_long_poll_whose_master_may_not_serve_for_the_whole_hold_is_refused():
    node = _Lapsing(lapse=(1.0, 10.0))
    outcome, at, made = _long_poll(node, wakes=(1.0, 2.0))
    assert outcome == "refused, leader None" and at == pytest.approx(1.0 + HOLD_S, abs=1e-5)
    assert made == [0.0]


def test_a_long_poll_whose_node_another_now_leads_is_redirected_at_once():
    node = _Lapsing(lapse=(0.0, 0.0), leads_until=1.0, next_leader=NEXT)
    outcome, at, made = _long_poll(node, wakes=(1.0, 2.0))
    assert (outcome, at, made) == (f"refused, leader {NEXT}", 1.0, [0.0])
