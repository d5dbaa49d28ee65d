"""Two changes of the membership asked at once, by a master about to be cut off with one
follower.

Five nodes. Master L and follower X are cut off from the other three, Y, A and B, and L
is asked to remove A and then B at once. The second change must wait until the first is
committed, and the first cannot be: it leaves L a membership of four, whose majority L
and X do not make. Both appended (pysyncobj means to refuse the second, but never
records the first as under way), L's membership would be L, X and Y, whose majority L
and X make: L would commit and acknowledge entries while Y, A and B, a majority of the
five they still know, elect a leader of their own and commit others at the same indexes
(same-index-same-entry), the split brain of two changes in flight.
"""

from __future__ import annotations

from ..scripted import Scenario, Step, cut, last_index, settled


def plan() -> list[Step]:
    cast: dict = {}

    def cut_off_and_ask_two_removals(world) -> None:
        lead = settled(world, 5)
        others = [n.name for n in world.nodes if n.name != lead.name]
        x, rest = others[0], others[1:]
        cast.update(l=lead.name, x=x, rest=rest, base=last_index(lead))
        world.client.believed = lead.name
        for a in (lead.name, x):
            for b in rest:
                cut(world, a, b)
        for removed in rest[1:]:  # A, then B, at once
            world.change_membership("rem", removed, lead, retire=False)

    def both_sides_went_on(world) -> bool:
        lead = world.by_name[cast["l"]]
        rest = [world.by_name[n] for n in cast["rest"]]  # members or not: A and B may be removed
        elected = any(n.raft is not None and n.raft._isLeader() for n in rest)
        return last_index(lead) >= cast["base"] + 5 and elected

    return [
        Step(
            "a master, 5 entries committed: cut it and one follower off, ask two removals",
            lambda w: settled(w, 5) is not None,
            cut_off_and_ask_two_removals,
        ),
        Step(
            "the master appended past the changes, the other three elected: heal",
            both_sides_went_on,
            lambda w: w.heal(),
        ),
    ]


SCENARIO = Scenario("two-changes", nodes=5, plan=plan, client_alone=True)
