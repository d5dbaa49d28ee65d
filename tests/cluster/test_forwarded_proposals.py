"""pysyncobj forwards a non-leader's proposal to the leader; Horologe's leader refuses it.

Three in-process Raft nodes: a proposal made on a follower (as a deposed master would
make one) is denied, never committed, while the leader's own proposals commit.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from horologe.cluster import SYNC, Entry, ProposalRejectedError
from horologe.wheel import Watermark

from .raft_trio import leader_of, propose_sync, start_three, stop_all


def test_a_proposal_forwarded_by_a_follower_is_refused(tmp_path):
    async def run() -> None:
        nodes = start_three(tmp_path)
        try:
            leader = await leader_of(nodes)
            follower = next(n for i, n in enumerate(nodes) if i != leader)
            await propose_sync(nodes[leader], 1_000)  # the leader's own: committed
            with pytest.raises(ProposalRejectedError):
                await propose_sync(follower, 2_000)  # forwarded to the leader: denied
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
            halted.state.halt("test: this replica cannot apply")
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
