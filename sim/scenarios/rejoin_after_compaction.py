"""A master cut off while it appends entries it cannot commit, back once the others
have compacted their logs past those entries.

The majority elects another master and commits other entries at the same indexes;
every node of it then cuts its log past the old master's last entry, so the old
master is caught up by a snapshot shipment, whose messages have no place in the log
(no ``prevLogIdx``) yet carry the leader's commit index. The old master must apply
nothing of its own suffix (same-index-same-entry): only entries committed by the
cluster, here the shipped snapshot's.
"""

from __future__ import annotations

from ..scripted import Scenario, Step, compacted_past, cut, join, last_index, leader, settled


def plan() -> list[Step]:
    cast: dict[str, str] = {}

    def others(world) -> list[str]:
        return [n.name for n in world.nodes if n.name != cast["old"]]

    def isolate_the_master(world) -> None:
        old = settled(world, 5).name
        cast["old"] = old
        world.client.believed = old
        for name in others(world):
            cut(world, old, name)

    def uncommitted_and_a_new_master(world) -> bool:
        old = world.by_name[cast["old"]]
        return last_index(old) >= old.raft.raftCommitIndex + 5 and leader(world, others(world)) is not None

    def propose_to_the_new_master(world) -> None:
        world.client.believed = leader(world, others(world)).name

    def bring_it_back(world) -> None:
        for name in others(world):
            join(world, cast["old"], name)
        world.heal()

    return [
        Step(
            "a master, 5 entries committed and applied everywhere: cut it off",
            lambda w: settled(w, 5) is not None,
            isolate_the_master,
        ),
        Step(
            "it holds 5 entries it cannot commit, another master leads",
            uncommitted_and_a_new_master,
            propose_to_the_new_master,
        ),
        Step(
            "the others compacted past its last entry: heal",
            lambda w: compacted_past(w, cast["old"]),
            bring_it_back,
            within_s=8.0,
        ),
    ]


SCENARIO = Scenario(
    "rejoin-after-compaction",
    nodes=3,
    plan=plan,
    # A shipment in several messages that take longer than a tick to arrive (as in every
    # run, sim/world.py: named here so that the scenario keeps them).
    knobs={"log_compaction_min_entries": 30, "tick_s": 0.005, "ship_chunk_bytes": 4096},
    bytes_per_s=1_000_000,
    client_alone=True,
)
