"""A master that may not serve for a moment holds a request until it may, rather than
refusing it.

A master refuses what it may not serve now (``NodeService.require_master``: a
``NotMasterError`` that names no leader, answered 503 ``no_master``): while its read lease
has lapsed, while a majority's clock readings are stale, before it has applied an entry of
its term, while it hands its place over, while it is halted. On a healthy cluster most of
these last a moment: a tick thread held up by a slow fsync lets the lease lapse until the
next echo comes back (docs/cluster.md, "A deposed master stops at once"), and a new master
serves once its barrier entry has applied. A refused client has to send again; a held one
is simply served a little later.

So the master check of a route (node/http/route_table.py, :meth:`MasterHold.check`) holds
such a request: it looks again every :data:`POLL_S`, for at most ``hold_s`` (the election
timeout: a master that may not serve for that long may well be replaced), and the hold
ends in one of three ways:

- ``served``: the check passed; the handler runs;
- ``redirected``: the node no longer leads and knows who does (a 307);
- ``refused``: the time is up, or the node no longer leads and knows no leader (a 503).

A refusal that names a leader (a follower's 307) and one made while the node does not lead
are raised at once: a client tries the other nodes meanwhile. A held request reads nothing
and proposes nothing until the check passes, so it is served exactly as if it had arrived
then. The counts of each ending are on ``/metrics`` (``horologe_requests_held``).

A long poll checks again each time it wakes (node/consumers/service.py, ``pull``): one
whose master may not serve for a moment while it waits is held the same way, then polls
on (:meth:`MasterHold.through`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from horologe.cluster import NotMasterError

POLL_S = 0.01  # how often a held request looks again
OUTCOMES = ("served", "redirected", "refused")
T = TypeVar("T")


class MasterHold:
    def __init__(self, require_master: Callable[[], None], leads: Callable[[], bool], hold_s: float) -> None:
        """``require_master()`` raises ``NotMasterError`` unless this node may serve now;
        ``leads()``: whether it leads, as last published; ``hold_s``: the longest hold."""
        self._require_master = require_master
        self._leads = leads
        self.hold_s = hold_s
        self.counts = dict.fromkeys(OUTCOMES, 0)  # on the loop only

    async def check(self) -> None:
        """The master check: return once this node may serve, holding a moment if need be;
        else raise the refusal (``NotMasterError``)."""
        try:
            self._require_master()
        except NotMasterError as refused:
            await self._wait(refused)

    async def through(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``'s result; when it raises a refusal this hold may wait out (its master
        check, made again as it waited, found this master may not serve for a moment),
        ``call()`` again once the master may serve. A call so made again must have done
        nothing it would not do again: a pull leases nothing before its check passes, and
        gives back the leases it took when the check after their commit fails."""
        while True:
            try:
                return await call()
            except NotMasterError as refused:
                await self._wait(refused)

    async def _wait(self, refused: NotMasterError) -> None:
        """Given the master check's refusal: return once the check passes within the hold,
        else raise its latest refusal (see the module docstring)."""
        if refused.leader is not None or not self._leads() or self.hold_s <= 0:
            raise refused
        loop = asyncio.get_running_loop()
        until = loop.time() + self.hold_s
        while True:
            await asyncio.sleep(min(POLL_S, max(0.0, until - loop.time())))
            try:
                self._require_master()
            except NotMasterError as e:
                if e.leader is None and self._leads() and loop.time() < until:
                    continue
                self.counts["redirected" if e.leader is not None else "refused"] += 1
                raise
            self.counts["served"] += 1
            return
