"""A follower's answer to an append names its term; the leader counts only its own term's.

pysyncobj's answer (``next_node_idx``) carries no term. A node that led, lost the lead and
leads again could take an answer sent to it in the earlier term: the follower's log may
have been rewritten since, and its index would count towards a commit of the new term
entries the follower does not have.
"""

from __future__ import annotations

import asyncio

from .raft_trio import applied_everywhere, leader_of, propose_sync, start_three, stop_all


def test_the_leader_drops_answers_of_another_term_and_takes_its_own(tmp_path):
    async def run() -> None:
        nodes = start_three(tmp_path)
        try:
            leader = nodes[await leader_of(nodes)]
            await propose_sync(leader, 1_000)

            def answer_from_the_past(_store):
                # On the tick thread, where the leader takes its messages.
                follower = sorted(leader.otherNodes, key=lambda n: n.id)[0]
                term = leader.raftCurrentTerm
                match = leader._SyncObj__raftMatchIndex
                before, dropped = match[follower], leader.stale_answers
                far = leader.last_log_index() + 100
                for stale in ({"term": term - 1}, {"term": term + 1}):
                    answer = {"type": "next_node_idx", "next_node_idx": far, "reset": False, "success": True}
                    leader._on_message(follower, answer | stale)
                after = match[follower]
                # Without a term (a node older than the rule, mid-upgrade): taken, as before.
                legacy = {"type": "next_node_idx", "next_node_idx": before + 1, "reset": False}
                leader._on_message(follower, legacy | {"success": True})
                return before, after, leader.stale_answers - dropped

            before, after, dropped = await leader.ask_writer(answer_from_the_past)
            assert dropped == 2
            assert after == before  # pysyncobj alone would have taken far - 1

            # The followers' own answers name the leader's term: entries still commit.
            await propose_sync(leader, 2_000)
            assert await applied_everywhere(nodes, 2_000)
        finally:
            await stop_all(nodes)

    asyncio.run(run())
