"""pysyncobj forwards a non-leader's proposal to the leader; Horologe's leader refuses it.

Three in-process Raft nodes: a proposal made on a follower (as a deposed master would
make one) is denied, never committed, while the leader's own proposals commit.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from pysyncobj import FAIL_REASON

from horologe.cluster import SYNC, Entry, EntryDroppedError, ProposalRejectedError
from horologe.cluster.entries import decode
from horologe.wheel import Watermark

from .raft_trio import leader_of, propose_sync, start_three, stop_all
from .ticked import crash, journal_entries, lead_with_peers, peer, propose, tick, ticked_node


def test_a_proposal_forwarded_by_a_follower_is_refused(tmp_path):
    async def run() -> None:
        nodes = start_three(tmp_path)
        try:
            leader = await leader_of(nodes)
            follower = next(n for i, n in enumerate(nodes) if i != leader)
            await propose_sync(nodes[leader], 1_000)  # the leader's own: committed
            # Denied (or failed before it was sent): dropped for certain, so safe to resend
            with pytest.raises(EntryDroppedError, match="nothing was done"):
                await propose_sync(follower, 2_000)
            await propose_sync(nodes[leader], 1_500)
            await asyncio.sleep(0.3)
            for n in nodes:
                assert n.state.ws == Watermark(1_500)  # 2_000 was never applied anywhere
        finally:
            await stop_all(nodes)

    asyncio.run(run())


def test_a_halted_leader_refuses_proposals_and_hands_over_under_a_stream_of_them(tmp_path):
    """Proposals that keep coming (a wheel turn makes one every 100 ms; here several are
    always in flight) must not keep the halted leader's followers a step behind its log,
    where pysyncobj denies every transfer to them."""

    async def run() -> None:
        nodes = start_three(tmp_path)
        stop = asyncio.Event()
        refused = 0

        async def stream(node, first_ms: int) -> None:
            nonlocal refused
            ms = first_ms
            while not stop.is_set():
                ms += 8
                try:
                    await node.propose(Entry(SYNC, Watermark(ms), ms).encode(), timeout=5)
                except ProposalRejectedError:
                    refused += 1
                    await asyncio.sleep(0.001)

        try:
            leader = await leader_of(nodes)
            halted = nodes[leader]
            # As a halt outside an apply is told: the loop refuses proposals from its next
            # turn on. (A halt of the state alone reached the loop only with the next
            # applied entry, and under load the handover could finish before any refusal.)
            halted._halt("test: this replica cannot apply")
            tasks = [asyncio.create_task(stream(halted, 10_000 + k)) for k in range(8)]
            others = [n for n in nodes if n is not halted]
            deadline = time.monotonic() + 5.0
            while not any(n.is_master() for n in others) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            stop.set()
            await asyncio.gather(*tasks)
            assert any(n.is_master() for n in others), "the halted leader never handed over"
            assert refused > 0
        finally:
            await stop_all(nodes)

    asyncio.run(run())


def test_a_proposal_waiting_when_its_leader_steps_down_fails_and_never_commits_later(tmp_path):
    """pysyncobj keeps a proposal its node made as leader and has not appended yet; with no
    leader known it waits, and is appended if the node leads again, in a later term: an
    entry made under one lead committed under another (the simulator's node services saw
    a pull's leases, forgotten with the lead, commit beside another pull's). It fails."""
    node = ticked_node(tmp_path / "n0", peers=("127.0.0.1:1", "127.0.0.1:2"))
    try:
        lead_with_peers(node)
        tick(node, 3)
        term = node.current_term()
        answers = propose(node, 7_000)  # queued: the next tick would append it
        node._on_message(
            peer(node, 1), {"type": "request_vote", "term": term + 1, "last_log_index": 0, "last_log_term": 0}
        )
        assert not node.is_master()
        tick(node)
        assert answers == [(None, FAIL_REASON.NOT_LEADER)]
        lead_with_peers(node)  # elected again, in a later term
        tick(node, 3)
        assert node.current_term() > term + 1
        stamped = [ms for ms in (_ms_of(cmd) for cmd, _, _ in journal_entries(node)) if ms is not None]
        assert 7_000 not in stamped
    finally:
        crash(node)


def _ms_of(command: bytes) -> int | None:
    """The clock a journal entry's command was stamped with (None: not one of ours)."""
    try:
        return decode(command[1:]).clock_ms
    except Exception:  # noqa: BLE001 - pysyncobj's no-op and membership commands
        return None
