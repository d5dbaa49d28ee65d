"""A follower that cannot hear the master while the others can: the master keeps its term.

Five nodes. Once a master has applied 5 entries everywhere, its links with one follower F
are cut both ways (connects refused); F still reaches the other three, and they the
master. F hears no append, so at its election timeout it would stand for election. For
``HELD_S`` the master must lead on in the term it had (``leader-kept`` otherwise), then
all heal and F catches up. The same happens when a follower restarts and its link from
the master comes up late (a soak's rolling restart: the master lost its term after each
follower restart).

Raft as pysyncobj has it gives F a later term at each timeout; a follower asked for a
vote refuses it while it hears the master, but takes the term, and stops taking the
master's appends. With the pre-vote (``cluster/raft/pre_vote.py``) F asks first whether
it would be elected, and keeps its term while a majority hears the master.
"""

from __future__ import annotations

from ..scripted import S, Scenario, Step, cut, leader, settled

HELD_S = 3.0


def plan() -> list[Step]:
    cast: dict = {}

    def cut_a_follower(world) -> None:
        master = settled(world, 5)
        follower = next(n for n in world.nodes if n is not master)
        cast.update(master=master.name, term=master.raft.current_term(), follower=follower.name)
        cast["at"] = world.clock.ns
        cut(world, master.name, follower.name)

    def held(world) -> bool:
        return world.clock.ns - cast["at"] >= HELD_S * S

    def check_and_heal(world) -> None:
        from ..world import Violation

        now = leader(world)
        seen = (now.name, now.raft.current_term()) if now is not None else None
        if seen != (cast["master"], cast["term"]):
            raise Violation(
                "leader-kept",
                f"{cast['master']} led in term {cast['term']} when {cast['follower']} was cut from it; "
                f"{HELD_S} s later the leader (name, term) is {seen}",
            )
        world.heal()

    return [
        Step(
            "a master, 5 entries applied everywhere: cut a follower from it",
            lambda w: settled(w, 5) is not None,
            cut_a_follower,
        ),
        Step(
            f"{HELD_S} s later the master leads in the same term: heal",
            held,
            check_and_heal,
            within_s=HELD_S + 1,
        ),
    ]


SCENARIO = Scenario("cut-from-the-leader", nodes=5, plan=plan)
