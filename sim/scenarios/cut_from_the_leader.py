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

from ..scripted import S, Scenario, Step, check_leader_kept, cut_a_follower, settled

HELD_S = 3.0


def plan() -> list[Step]:
    cast: dict = {}

    def held(world) -> bool:
        return world.clock.ns - cast["at"] >= HELD_S * S

    def check_and_heal(world) -> None:
        check_leader_kept(world, cast, f"{cast['follower']} was cut from it, {HELD_S} s ago")

    return [
        Step(
            "a master, 5 entries applied everywhere: cut a follower from it",
            lambda w: settled(w, 5) is not None,
            lambda w: cut_a_follower(w, 5, cast),
        ),
        Step(
            f"{HELD_S} s later the master leads in the same term: heal",
            held,
            check_and_heal,
            within_s=HELD_S + 1,
        ),
    ]


SCENARIO = Scenario("cut-from-the-leader", nodes=5, plan=plan)
