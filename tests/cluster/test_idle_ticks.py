"""An idle node's tick thread wakes at its timed steps (a heartbeat, its election deadline)
and for messages, not on a fixed 5 ms grid: an idle node woke 200 times a second for
nothing, and three of them took a third of a core on a host doing nothing."""

from __future__ import annotations

import asyncio

from .raft_trio import applied_everywhere, leader_of, propose_sync, start_three, stop_all

IDLE_S = 2.0
MOST_TICKS_A_SECOND = 120  # heartbeats (20 a second), their answers and keep-alives


def test_an_idle_node_ticks_at_its_timed_steps_not_on_a_grid(tmp_path):
    async def run() -> None:
        nodes = start_three(tmp_path)
        try:
            leader = nodes[await leader_of(nodes)]
            await propose_sync(leader, 1_000)
            await asyncio.sleep(0.5)  # every link up, every node applied
            ticks = [0, 0, 0]
            for i, node in enumerate(nodes):
                node.addOnTickCallback(lambda i=i: ticks.__setitem__(i, ticks[i] + 1))
            await asyncio.sleep(IDLE_S)
            assert all(0 < t < MOST_TICKS_A_SECOND * IDLE_S for t in ticks), ticks
            # and the cluster still commits at once
            await propose_sync(leader, 2_000)
            assert await applied_everywhere(nodes, 2_000)
        finally:
            await stop_all(nodes)

    asyncio.run(run())
