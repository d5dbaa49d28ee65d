"""The membership changed under the client's proposals and a crash: 3 → 4 → 5 nodes, then
one of the first three removed (docs/deploy.md, "Membership").

A spare is added (fed the log as a learner, then committed), the leader of the 4-node
cluster crashes, and the others (a majority of four: the new node counts) elect; the old
leader comes back while a second spare is added; then a member that does not lead is
removed, and stays down. Every invariant holds across the changes: the one leader per term
of each membership, every acknowledged entry on a majority of the membership it was
committed under, each new leader holding every acknowledged entry, and at the end the
same ready logs on the members.
"""

from __future__ import annotations

from ..scripted import Scenario, Step, add_member, leader, members, settled


def plan() -> list[Step]:
    cast: dict[str, str] = {}

    def crash_the_leader(world) -> None:
        lead = leader(world, members(world))
        cast["crashed"] = lead.name
        lead.crash()

    def another_leader(world) -> bool:
        others = [n for n in members(world) if n != cast["crashed"]]
        return leader(world, others) is not None

    def back_and_add_n5(world) -> None:
        world.by_name[cast["crashed"]].start()
        add_member("n5")(world)

    def remove_a_first_follower(world) -> None:
        lead = leader(world, members(world))
        victim = next(n for n in ("n1", "n2", "n3") if n != lead.name)
        cast["removed"] = victim
        world.change_membership("rem", victim, lead)

    return [
        Step(
            "a leader, 5 entries committed and applied everywhere: add n4",
            lambda w: settled(w, 5) is not None,
            add_member("n4"),
        ),
        Step(
            "n4 is a member: crash the leader",
            lambda w: "n4" in members(w) and leader(w) is not None,
            crash_the_leader,
            within_s=15.0,
        ),
        Step("another leader: the crashed one back, add n5", another_leader, back_and_add_n5),
        Step(
            "n5 is a member: remove a first node that does not lead",
            lambda w: "n5" in members(w) and leader(w) is not None,
            remove_a_first_follower,
            within_s=15.0,
        ),
        Step(
            "it is removed: heal",
            lambda w: cast["removed"] not in members(w),
            lambda w: w.heal(),
            within_s=10.0,
        ),
    ]


SCENARIO = Scenario("grow-and-replace", nodes=3, plan=plan, spares=2)
