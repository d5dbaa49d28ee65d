"""A follower loses its power in the middle of installing a snapshot the leader shipped.

A follower F is cut off while the others commit and compact their logs past its last
entry; back, it is shipped a snapshot. Its process ends at the fsync of the manifest
that would replace its own dump, after the shipped store is in place, and its power goes
with it. pysyncobj received the shipped dump into a temp file that it renamed over F's
own dump unsynced, so F found a torn or empty dump at restart and halted (``no-halt``,
checked after every restart: the run's last restart, after a later install, would mend it);
the dump is now received beside F's own, fsynced, and F's own dump and journal stay
until the install ends, so F restarts on them and is shipped the snapshot again.
"""

from __future__ import annotations

from ..scripted import Scenario, Step, compacted_past, cut, join, leader, settled
from ..world import MS


def plan() -> list[Step]:
    cast: dict[str, str] = {}

    def others(world) -> list[str]:
        return [n.name for n in world.nodes if n.name != cast["f"]]

    def cut_a_follower(world) -> None:
        lead = settled(world, 5)
        follower = next(n for n in world.nodes if n is not lead)
        cast["f"] = follower.name
        world.client.believed = lead.name
        for name in others(world):
            cut(world, follower.name, name)

    def arm_and_heal(world) -> None:
        follower = world.by_name[cast["f"]]
        world.disk.crash_at_fsync(follower.data_dir, "raft/snapshot.tmp", 0)
        for name in others(world):
            join(world, cast["f"], name)

    def it_died_installing(world) -> bool:
        return not world.by_name[cast["f"]].alive

    def power_and_restart(world) -> None:
        world.by_name[cast["f"]].lose_power()
        world.at(world.rng.randrange(100 * MS, 500 * MS), "fault", None, world.restart_of(cast["f"]))

    def caught_up(world) -> bool:
        follower = world.by_name[cast["f"]]
        lead = leader(world)
        return (
            follower.alive and lead is not None and follower.raft.raftLastApplied >= lead.raft.raftCommitIndex
        )

    return [
        Step(
            "a master, 5 entries committed and applied everywhere: cut a follower off",
            lambda w: settled(w, 5) is not None,
            cut_a_follower,
        ),
        Step(
            "the others compacted past its last entry: its next install's manifest fsync ends it; heal",
            lambda w: compacted_past(w, cast["f"]),
            arm_and_heal,
            within_s=8.0,
        ),
        Step(
            "it died installing: its power goes, it restarts 0.1-0.5 s later",
            it_died_installing,
            power_and_restart,
        ),
        Step("it is back and caught up with the master's commit: heal", caught_up, lambda w: w.heal()),
    ]


SCENARIO = Scenario(
    "power-in-install",
    nodes=3,
    plan=plan,
    knobs={"log_compaction_min_entries": 30, "tick_s": 0.005, "ship_chunk_bytes": 4096},
    power_loss=True,
)
