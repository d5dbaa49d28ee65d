"""pysyncobj forwards a non-leader's proposal to the leader; Horologe's leader refuses it.

Three in-process Raft nodes: a proposal made on a follower (as a deposed master would
make one) is denied, never committed, while the leader's own proposals commit.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from horologe.cluster import SYNC, ClusterSettings, Entry, Peer, ProposalRejectedError, StateMachine
from horologe.cluster.loop_crossing import LoopCrossing
from horologe.cluster.raft_node import RaftNode
from horologe.storage import Storage
from horologe.wheel import Watermark
from testkit.process_cluster import free_ports


def _start(tmp_path) -> list[RaftNode]:
    """Three nodes whose crossings go to the running loop (the test's own)."""
    addrs = [f"127.0.0.1:{p}" for p in free_ports(3)]
    crossing = LoopCrossing(asyncio.get_running_loop())
    made = []
    for i, addr in enumerate(addrs):
        store = Storage(str(tmp_path / f"n{i}" / "store"))
        peers = tuple(Peer(f"n{j}", a, "127.0.0.1:1") for j, a in enumerate(addrs) if j != i)
        settings = ClusterSettings(f"n{i}", addr, str(tmp_path / f"n{i}"), peers, insecure_dev=True)
        made.append(RaftNode(settings, StateMachine(store), crossing, lambda _a: None, lambda _r: None))
    return made


async def _leader(nodes, timeout_s: float = 15.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leaders = [i for i, n in enumerate(nodes) if n.is_master()]
        if len(leaders) == 1 and all(n.leader_address() == nodes[leaders[0]].settings.raft for n in nodes):
            return leaders[0]
        await asyncio.sleep(0.05)
    raise TimeoutError("no leader")


def test_a_proposal_forwarded_by_a_follower_is_refused(tmp_path):
    async def propose(node, ms: int):
        return await node.propose(Entry(SYNC, Watermark(ms), ms).encode(), timeout=5)

    async def run() -> None:
        nodes = _start(tmp_path)
        try:
            leader = await _leader(nodes)
            follower = next(n for i, n in enumerate(nodes) if i != leader)
            await propose(nodes[leader], 1_000)  # the leader's own: committed
            with pytest.raises(ProposalRejectedError):
                await propose(follower, 2_000)  # forwarded to the leader: denied
            await propose(nodes[leader], 1_500)
            await asyncio.sleep(0.3)
            for n in nodes:
                assert n.state.ws == Watermark(1_500)  # 2_000 was never applied anywhere
        finally:
            for n in nodes:
                await asyncio.to_thread(n.destroy_synchronous)
                n.state.store.close()

    asyncio.run(run())


def test_a_halted_leader_refuses_proposals_and_hands_over_under_a_stream_of_them(tmp_path):
    """Proposals that keep coming (a wheel turn makes one every 100 ms; here several are
    always in flight) must not keep the halted leader's followers a step behind its log,
    where pysyncobj denies every transfer to them."""

    async def run() -> None:
        nodes = _start(tmp_path)
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
            leader = await _leader(nodes)
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
            for n in nodes:
                await asyncio.to_thread(n.destroy_synchronous)
                n.state.store.close()

    asyncio.run(run())
