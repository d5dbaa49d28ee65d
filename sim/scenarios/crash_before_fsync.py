"""A follower's process dies between writing the client's produce to its journal and the
fsync that would make it durable, and restarts.

The client holds until every node has applied its whole log, then makes one produce. The
follower F appends it, and its process ends as it calls the fsync before its answer: the
entry is in F's page cache only. F restarts 0.1-0.5 s later and reads the entry back. The
master's next append (a heartbeat, or the entry again) gets F's answer that it holds the
entry. A journal that took what it read back as durable answered without syncing it, and
a power loss could still take it (answer-from-its-disk); the journal now counts what it
read back as unsynced, and the answer's sync makes it durable first.
"""

from __future__ import annotations

import os

from horologe.cluster import PRODUCE

from ..scripted import Scenario, Step, leader, quiet
from ..world import MS
from .power_after_ack import all_back, hold, quiet_5, resume, settled_5


def plan() -> list[Step]:
    cast: dict = {}

    def crash_and_produce(world) -> None:
        lead = quiet(world, 5)
        follower = next(n for n in world.nodes if n is not lead)
        cast["follower"] = follower
        journal = follower.raft._journal.path
        world.disk.crash_at_fsync(
            follower.data_dir, os.path.relpath(journal, follower.data_dir), os.path.getsize(journal)
        )
        world.at(MS // 10, "loop", lead.name, world.request, lead, lead.incarnation, PRODUCE)

    def follower_down(world) -> bool:
        return not cast["follower"].alive

    def restart(world) -> None:
        back = world.restart_of(cast["follower"].name)
        world.at(world.rng.randrange(100 * MS, 500 * MS), "fault", None, back)

    def caught_up(world) -> bool:
        return all_back(world) and cast["follower"].raft.raftCommitIndex >= leader(world).raft.raftCommitIndex

    return [
        Step("a master, 5 entries applied everywhere: the client holds", settled_5, hold),
        Step(
            "every node applied its whole log: one produce; a follower's process ends at the fsync of it",
            quiet_5,
            crash_and_produce,
        ),
        Step("the follower is down: it restarts 0.1-0.5 s later", follower_down, restart),
        Step("it is back and caught up with the master's commit: heal", caught_up, resume),
    ]


SCENARIO = Scenario("crash-before-fsync", nodes=3, plan=plan, power_loss=True, client_alone=True)
