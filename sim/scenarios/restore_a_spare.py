"""A lost machine replaced from a recent backup of a member (docs/deploy.md, "Replace a
machine whose disk is lost"): the master feeds the new node the log from the backup's
index, with no snapshot shipped.

Three nodes and a spare n4. Once a master has applied ``BACKUP_AT`` entries everywhere
(more than ``JOIN_FRESH_DUMP_ENTRIES``, with no dump taken), a follower is backed up
(``RaftNode.take_backup``'s point, the tar ``GET /admin/backup`` sends) and the backup
restored into n4's empty data folder (``horologe restore``). Once the master committed
``AFTER`` entries more, n4 starts to join and is added, with the applied index and term
its ``/readyz`` would say (``horologe cluster add`` reads them there). Once n4 is a
member, its log must still begin at the backup's entries (``fed-from-the-log``: otherwise
the master shipped it a snapshot), and the master crashes; once another node leads, the
crashed one comes back and all heal. Every invariant holds across: the restored node's
applies are the log's, and a master it helps elect holds every acknowledged entry.

With the canary ``no-joiner-applied`` (the master judges by its own last dump alone, as
before 1b6a769) it takes a fresh dump and ships it to n4: ``fed-from-the-log``.
"""

from __future__ import annotations

import os
import shutil

from horologe.cluster.backup.receive import receive
from horologe.cluster.backup.restore import restore
from horologe.cluster.backup.stream import backup_chunks
from horologe.cluster.raft.membership import JOIN_FRESH_DUMP_ENTRIES

from ..scripted import Scenario, Step, first_index, leader, members, settled

SPARE = "n4"
# Past the entries a joiner is fed without a fresh dump, counted from the master's last
# dump (it takes none here): the backup's index is what spares n4 one.
BACKUP_AT = JOIN_FRESH_DUMP_ENTRIES + 10
AFTER = 20


def back_up(world, name: str, folder: str) -> int:
    """A backup of node ``name`` received into ``folder``, as ``GET /admin/backup`` streams
    it and ``horologe backup`` receives it, taken between two of its applies (every step
    of the world is); its Raft index."""
    raft = world.by_name[name].raft
    point = raft.backup_point(raft.state.store, "sim")
    try:
        receive(backup_chunks(point, name, world.by_name[name].wall_ms()), folder)
    finally:
        shutil.rmtree(point.folder, ignore_errors=True)
    return point.entries[1][1]


def plan() -> list[Step]:
    cast: dict = {}

    def back_up_a_follower(world) -> None:
        master = settled(world, BACKUP_AT)
        follower = next(n for n in world.nodes if n is not master)
        folder = os.path.join(world.scratch(), "backup")
        cast["index"] = back_up(world, follower.name, folder)
        restore(folder, world.by_name[SPARE].data_dir)
        cast["commit"] = master.raft.raftCommitIndex

    def past_the_backup(world) -> bool:
        lead = leader(world)
        return lead is not None and lead.raft.raftCommitIndex >= cast["commit"] + AFTER

    def add_the_spare(world) -> None:
        spare = world.by_name[SPARE]
        spare.start()
        store = spare.raft.state.store
        applied = (store.applied_index, store.meta("applied_term") or 0)
        world.change_membership("add", SPARE, leader(world), applied=applied)

    def crash_the_master(world) -> None:
        from ..world import Violation

        first = first_index(world.by_name[SPARE])
        if first > cast["index"]:
            raise Violation(
                "fed-from-the-log",
                f"{SPARE} was restored from a backup at index {cast['index']} and added; its log begins "
                f"at {first}: the master shipped it a snapshot rather than the log from the backup",
            )
        lead = leader(world, members(world))
        cast["crashed"] = lead.name
        lead.crash()

    def another_leader(world) -> bool:
        return leader(world, [n for n in members(world) if n != cast["crashed"]]) is not None

    def back_and_heal(world) -> None:
        world.by_name[cast["crashed"]].start()
        world.heal()

    return [
        Step(
            f"a master, {BACKUP_AT} entries applied everywhere: back up a follower, restore it as n4",
            lambda w: settled(w, BACKUP_AT) is not None,
            back_up_a_follower,
            within_s=120.0,
        ),
        Step(
            f"{AFTER} entries committed past it: n4 starts to join, and is added",
            past_the_backup,
            add_the_spare,
        ),
        Step(
            "n4 is a member, fed from the log: crash the master",
            lambda w: SPARE in members(w) and leader(w) is not None,
            crash_the_master,
            within_s=15.0,
        ),
        Step("another leader: the crashed one back, heal", another_leader, back_and_heal),
    ]


# No log compaction: the master's log holds the backup's entries, so a snapshot shipped
# to n4 is one the backup should have spared (a log cut past them ships one, rightly).
SCENARIO = Scenario(
    "restore-a-spare", nodes=3, plan=plan, spares=1, knobs={"log_compaction_min_entries": 50_000}
)
