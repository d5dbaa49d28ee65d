"""The leader's own copy of an entry is on disk before it counts towards a commit.

pysyncobj counts the leader's log towards a majority with its followers' answers. The
followers sync before they answer; the leader synced only before applying, after the
commit, which the followers may learn and apply: a leader that lost power then, with one
follower behind, could be outvoted by a log without an entry another node had applied.
"""

from __future__ import annotations

import asyncio

from .raft_trio import applied_everywhere, leader_of, propose_sync, start_three, stop_all


def test_every_commit_index_the_leader_sets_names_entries_it_has_synced(tmp_path):
    async def run() -> None:
        nodes = start_three(tmp_path)
        try:
            leader = nodes[await leader_of(nodes)]
            journal = leader._journal
            # Entries up to here may have been synced before the recorder below was in place
            # (the new leader's no-op commits while it is installed): only later ones are
            # judged, the proposals below.
            before = leader.last_log_index()
            synced = [0]
            commits: list[tuple[int, int]] = []  # (commit index set, last index synced then)
            sync, set_commit = journal.sync, journal.setRaftCommitIndex

            def recording_sync() -> bool:  # both run on the tick thread
                last = leader.last_log_index()
                done = sync()
                synced[0] = last
                return done

            def recording_commit(index) -> None:
                commits.append((index, synced[0]))
                set_commit(index)

            journal.sync, journal.setRaftCommitIndex = recording_sync, recording_commit
            for ms in range(1_000, 21_000, 1_000):
                await propose_sync(leader, ms)
            assert len(commits) >= 20
            assert [c for c in commits if c[0] > max(c[1], before)] == []
            assert await applied_everywhere(nodes, 20_000)
        finally:
            await stop_all(nodes)

    asyncio.run(run())
