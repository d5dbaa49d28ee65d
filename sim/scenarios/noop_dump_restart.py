"""A node restarts from a Raft dump taken right after a new leader's no-op.

pysyncobj's no-op never reaches the store, so such a dump names a Raft index one past
the store's applied index. The client holds its requests while a master is crashed, so
the new master's no-op is the last entry it applies; with time-based compaction it then
dumps at that no-op, and crashes right after the dump is in place. At its restart the
store must be found not behind the dump (no-halt): it is measured against its own index
in the dump.
"""

from __future__ import annotations

from ..scripted import Scenario, Step, last_index, last_term, leader, settled


def plan() -> list[Step]:
    cast: dict = {}

    def crash_the_master(world) -> None:
        old = settled(world, 5)
        cast["old"] = old.name
        world.client.paused = True
        old.crash()

    def noop_applied(world) -> bool:
        new = leader(world)
        if new is None or new.name == cast["old"]:
            return False
        raft = new.raft
        done = last_term(new) == raft.current_term() and raft.raftLastApplied == last_index(new)
        cast["new"] = new.name
        return done

    def crash_at_its_next_dump(world) -> None:
        world.by_name[cast["new"]].crash_at_dump = True

    def restarted(world) -> bool:
        new = world.by_name[cast["new"]]
        return new.crashes > 0 and new.alive and not new.restart_check

    def heal(world) -> None:
        world.client.paused = False
        world.heal()

    return [
        Step(
            "a master, 5 entries applied everywhere: the client holds, the master crashes",
            lambda w: settled(w, 5) is not None,
            crash_the_master,
        ),
        Step(
            "a new master applied its no-op: it crashes right after its next dump",
            noop_applied,
            crash_at_its_next_dump,
        ),
        Step("it restarted from that dump: heal", restarted, heal),
    ]


SCENARIO = Scenario(
    "noop-dump-restart",
    nodes=3,
    plan=plan,
    # Dumps by time only: the one after the no-op comes with nothing applied after it.
    knobs={"tick_s": 0.005, "log_compaction_min_entries": 50_000, "log_compaction_min_time": 0.3},
)
