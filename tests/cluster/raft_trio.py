"""Three in-process Raft nodes on free ports, for tests of the Raft shell."""

from __future__ import annotations

import asyncio
import time

from horologe.cluster import SYNC, ClusterSettings, Entry, Peer, StateMachine
from horologe.cluster.raft.loop_crossing import LoopCrossing
from horologe.cluster.raft.node import RaftNode
from horologe.storage import Storage
from horologe.wheel import Watermark
from testkit.process_cluster import free_ports


def start_three(tmp_path) -> list[RaftNode]:
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


async def stop_all(nodes: list[RaftNode]) -> None:
    for n in nodes:
        await asyncio.to_thread(n.destroy_synchronous)
        n.state.store.close()


async def leader_of(nodes: list[RaftNode], timeout_s: float = 15.0) -> int:
    """The index of the node all three agree leads."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leaders = [i for i, n in enumerate(nodes) if n.is_master()]
        if len(leaders) == 1 and all(n.leader_address() == nodes[leaders[0]].settings.raft for n in nodes):
            return leaders[0]
        await asyncio.sleep(0.05)
    raise TimeoutError("no leader")


async def propose_sync(node: RaftNode, ms: int) -> None:
    """Commit a watermark-only entry at ``ms``."""
    await node.propose(Entry(SYNC, Watermark(ms), ms).encode(), timeout=5)


async def applied_everywhere(nodes: list[RaftNode], ms: int) -> bool:
    """Whether every node applied the sync at ``ms`` 0.3 s on: followers learn a commit with
    the leader's next append, a tick or a heartbeat later."""
    await asyncio.sleep(0.3)
    return all(n.state.ws.ms == ms for n in nodes)
