"""A bit of a follower's last journal entry rots while the follower is down.

A follower F has synced, and answered for, a committed entry that is the last in its
journal, past the commit index its journal stored last (stored on a one-second timer).
F crashes with nothing unsynced after that entry, one bit of the entry flips on its
disk, and F restarts. The damaged frame is whole: its lengths agree and no sector of it
reads back empty, as no torn write leaves one. The journal cut it as a torn tail, so F
lost a committed entry it held (``restart-keeps-committed``); it now refuses to start
(cluster/raft/journal.py), and F is replaced as an operator would: a spare is added and
F removed (docs/deploy.md, "Replacing a machine"). Every invariant then holds on the
new membership.
"""

from __future__ import annotations

from ..scripted import Scenario, Step, add_member, leader, members, settled
from ..world import MS


def plan() -> list[Step]:
    cast: dict[str, str] = {}

    def pick_a_follower(world) -> None:
        lead = settled(world, 5)
        cast["f"] = next(n.name for n in world.nodes if n is not lead)

    def last_entry_synced_and_committed(world) -> bool:
        """F's journal ends at an entry on its disk, committed, past its stored commit index."""
        f = world.by_name[cast["f"]]
        if not f.alive:
            return False
        journal = f.raft._journal
        last = journal.last_idx
        committed = world.applied.get(last)
        return (
            f.synced == last
            and not journal._dirty
            and committed is not None
            and committed[0] == journal.term_at(last)
            and journal._meta.get("raftCommitIndex", 0) < last
        )

    def crash_and_rot(world) -> None:
        f = world.by_name[cast["f"]]
        journal = f.raft._journal
        path, at, end = journal.path, journal._offsets[-1], journal._file.length
        f.crash()
        with open(path, "r+b") as file:  # one bit in the middle of the last frame
            middle = (at + end) // 2
            file.seek(middle)
            byte = file.read(1)[0]
            file.seek(middle)
            file.write(bytes([byte ^ 0x10]))
        world.note(f"{f.name} journal: bit flipped at {middle} (last frame {at}..{end})")
        world.damaged.add(f.name)
        world.at(world.rng.randrange(100 * MS, 500 * MS), "fault", None, world.restart_of(f.name))

    def remove_it(world) -> None:
        world.change_membership("rem", cast["f"], leader(world, members(world)))

    return [
        Step(
            "a leader, 5 entries committed and applied everywhere: pick a follower F",
            lambda w: settled(w, 5) is not None,
            pick_a_follower,
        ),
        Step(
            "F's last entry is synced, committed, past its stored commit index: F crashes, a bit flips",
            last_entry_synced_and_committed,
            crash_and_rot,
        ),
        Step(
            "F tried to start again: add a spare, n4",
            lambda w: w.by_name[cast["f"]].starts_refused > 0 and leader(w, members(w)) is not None,
            add_member("n4"),
        ),
        Step(
            "n4 is a member: remove F",
            lambda w: "n4" in members(w) and leader(w, members(w)) is not None,
            remove_it,
            within_s=15.0,
        ),
        Step("F is removed: heal", lambda w: cast["f"] not in members(w), lambda w: w.heal(), within_s=10.0),
    ]


SCENARIO = Scenario("rot-in-journal", nodes=3, plan=plan, spares=1)
