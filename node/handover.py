"""A master's handover: the wheel and Raft leadership passed to another node (DESIGN §5),
asked by an admin, by a graceful stop, or by this node when its clock strays from the
quorum's.

The target must have a link to every node this master is linked to, or one of them would
not hear it, campaign, and take the wheel back (docs/cluster.md, "Links and releases");
only the candidate knows its links, so the master asks it (node/peer_readiness.py). While
the handover runs (:attr:`Handover.releasing`), no entry but its own is proposed (writes
get 503 and are retried), so the target catches up and wins; if this node is elected
again, the transfer is retried. Loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from horologe.cluster import (
    RELEASE,
    SYNC,
    ClusterError,
    EntryDroppedError,
    NotMasterError,
    Peer,
    ProposalRejectedError,
)

from .config import NodeConfig
from .errors import (
    NoLinkedTarget,
    Refused,
    ReleaseInProgress,
    TransferFailed,
    TransferUnconfirmed,
    UnknownNode,
)
from .quorum_clock import majority

log = logging.getLogger(__name__)

CLOCK_HANDOVER_EVERY_S = 10.0  # at most one handover for a straying clock in this long
SETTLE_S = 2.0  # the most a release waits for what the master runs to settle (push's open requests)


class Handover:
    def __init__(
        self,
        config: NodeConfig,
        readiness: Callable[[str, float], Awaitable[dict | None]],
        *,
        require_master: Callable[[], None],
        is_master: Callable[[], bool],
        leader_id: Callable[[], str | None],
        linked_peer_ids: Callable[[], set[str]],
        peers: Callable[[], tuple[Peer, ...]],
        propose: Callable[..., Awaitable[object]],
        transfer: Callable[[str | None, float], Awaitable[bool]],
        pause_leading: Callable[[], Awaitable[None]],
        resume_leading: Callable[[], None],
        settle_leading: Callable[[], Awaitable[None]] = lambda: asyncio.sleep(0),
    ) -> None:
        """``readiness(url, timeout_s)``: a peer's ``/readyz`` body, None when it does not
        answer in time (node/peer_readiness.py). ``propose(kind, **fields)`` an entry and
        wait until applied; ``transfer(raft address, deadline_s)`` Raft leadership, True
        once this node stepped down; ``settle_leading`` stops what must settle its work
        in entries of its own first (push: the requests open end and are acked), before
        the release proposes none but its own; ``pause_leading`` stops the wheel and push
        (and waits), ``resume_leading`` starts them again when this node is still master
        after all. ``peers()`` are the other voting members now (the membership changes online)."""
        self._config = config
        self._peers = peers
        self._readiness = readiness
        self._require_master = require_master
        self._is_master = is_master
        self._leader_id = leader_id
        self._linked_peer_ids = linked_peer_ids
        self._propose = propose
        self._transfer = transfer
        self._pause_leading = pause_leading
        self._settle_leading = settle_leading
        self._resume_leading = resume_leading
        self.releasing = False  # a handover is under way: no new entries but its own
        self._running = False  # release is running (from its first await)
        self.syncs_applied = 0  # S entries applied here, and when the latest was
        self.last_sync_applied_at = 0.0
        self.clock_handovers = 0
        self._next_clock_handover = 0.0
        self._tasks: set[asyncio.Task] = set()

    def sync_applied(self) -> None:
        """An ``S`` entry was applied here (the new master's first one ends the gap)."""
        self.syncs_applied += 1
        self.last_sync_applied_at = time.monotonic()

    async def release(self, to: str | None) -> dict:
        """Stop the wheel, commit a final S and X, hand Raft leadership over to ``to`` (a
        node id) or the first peer fit for it. It answers once the linked nodes follow the
        new master. One release at a time: another asked meanwhile (an admin's and a clock
        handover's, say) is refused."""
        self._require_master()
        if self._running:
            raise ReleaseInProgress("a release of this master is already under way")
        self._running = True
        try:
            return await self._release(to)
        finally:
            self._running = False

    def for_clock(self, offset_ms: int, tolerance_ms: int) -> None:
        """This master's clock disagrees with the quorum's: hand the wheel over (at most
        every :data:`CLOCK_HANDOVER_EVERY_S`)."""
        if time.monotonic() < self._next_clock_handover:
            return
        self._next_clock_handover = time.monotonic() + CLOCK_HANDOVER_EVERY_S
        self.clock_handovers += 1
        log.warning(
            "this clock is %+d ms off the quorum's (tolerance %d ms): handing the wheel over",
            offset_ms,
            tolerance_ms,
        )

        async def release() -> None:
            try:
                log.info("released for a clock off the quorum's: %s", await self.release(None))
            except (Refused, NotMasterError, ClusterError) as e:
                log.warning("could not hand over for the clock: %s", e)

        task = asyncio.get_running_loop().create_task(release())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Cancel a clock handover under way (the node shuts down)."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks))

    async def _release(self, to: str | None) -> dict:
        linked = self._linked_peer_ids()
        target = await self._target(to, linked)
        try:
            # Bounded: a graceful stop hands over within RELEASE_ON_SHUTDOWN_S (node/main.py),
            # and what is not settled by then is sent again by the next master.
            async with asyncio.timeout(SETTLE_S):
                await self._settle_leading()
        except TimeoutError:
            log.info("release: what the master runs did not settle within %g s; handing over", SETTLE_S)
        except BaseException:
            if self._is_master():
                self._resume_leading()
            raise
        t0 = time.monotonic()
        self.releasing = True
        await self._pause_leading()
        try:
            try:
                await self._propose(SYNC)
                await self._propose(RELEASE, node=self._config.node_id)
            except EntryDroppedError as e:
                # The lead was lost meanwhile, and another node takes over: what was asked
                # happened, so not a refusal a client would send again (to the new master).
                raise ProposalRejectedError(f"this node stopped leading during the release: {e}") from e
            marker = self.syncs_applied
            new_master = None
            for _attempt in range(3):
                if not await self._transfer(target.raft, 3.0):
                    break
                new_master = await self._await_other_master(3.0)
                if new_master is not None or not self._is_master():
                    break
        finally:
            self.releasing = False
            if self._is_master():
                self._resume_leading()
        if new_master is None:
            if self._is_master():
                raise TransferFailed("no other node took over; this node is still master")
            # Not TransferFailed: that says nothing was done, and a client sends it again.
            raise TransferUnconfirmed(
                "this node stepped down, and no other node has taken over yet; an election is under way"
            )
        heard_by = await self._followers_of(new_master, linked, 2.0)
        if len(heard_by) < majority(1 + len(self._peers())):
            raise TransferUnconfirmed(
                f"{new_master} took over but only {', '.join(heard_by)} follow it; it may be deposed",
            )
        deadline = time.monotonic() + 3.0
        while self.syncs_applied <= marker and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        gap_ms = None
        if self.syncs_applied > marker:
            gap_ms = round((self.last_sync_applied_at - t0) * 1000, 1)
        return {
            "old_master": self._config.node_id,
            "new_master": new_master,
            "gap_ms": gap_ms,
            "heard_by": heard_by,
        }

    async def _target(self, to: str | None, linked: set[str]) -> Peer:
        """The named peer, or the first one, that has a link to every node linked to this one."""
        config = self._config
        peers = self._peers()
        if to is not None and to not in {p.node_id for p in peers}:
            raise UnknownNode(f"no peer named {to!r}", "to")
        reasons = []
        for peer in peers:
            if to not in (None, peer.node_id):
                continue
            if peer.node_id not in linked:
                reasons.append(f"{peer.node_id} has no link to {config.node_id}")
                continue
            seen = await self._readiness(config.http_url(peer.http), 1.0)
            if seen is None:
                reasons.append(f"{peer.node_id} did not answer /readyz")
                continue
            missing = sorted(n for n in linked - {peer.node_id} if not seen.get("links", {}).get(n))
            if missing:
                reasons.append(f"{peer.node_id} has no link to {', '.join(missing)}")
                continue
            return peer
        raise NoLinkedTarget(
            "no node could take over and be heard by every node: " + "; ".join(reasons),
            "to" if to is not None else None,
        )

    async def _followers_of(self, master: str, linked: set[str], timeout_s: float) -> list[str]:
        """The nodes that follow ``master`` (it included), waiting up to ``timeout_s`` for the linked ones."""
        config = self._config
        heard = {master}
        deadline = time.monotonic() + timeout_s
        while True:
            if self._leader_id() == master:
                heard.add(config.node_id)
            for peer in self._peers():
                if peer.node_id in linked and peer.node_id not in heard:
                    seen = await self._readiness(
                        config.http_url(peer.http), max(0.05, deadline - time.monotonic())
                    )
                    if seen is not None and seen.get("leader") == master:
                        heard.add(peer.node_id)
            if heard >= linked | {config.node_id} or time.monotonic() >= deadline:
                return sorted(heard)
            await asyncio.sleep(0.02)

    async def _await_other_master(self, timeout_s: float) -> str | None:
        """The new master's id once one other than this node is known, else None."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            leader = self._leader_id()
            if leader is not None and leader != self._config.node_id:
                return leader
            if self._is_master():
                return None  # elected again: the caller retries the transfer
            await asyncio.sleep(0.002)
        return None
