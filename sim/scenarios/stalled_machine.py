"""A machine that stalls for longer than the election timeout, all three nodes at once,
while one follower is cut from the master: the master keeps its term.

Three nodes. Once a master M has applied 5 entries everywhere, its links with one
follower F are cut both ways and every process stops (SIGSTOP) for ``STOP_S``, as on a
host that froze or starved them all: F resumes ``AHEAD_S`` before M and the other
follower W. For ``HELD_S`` after the stall M must lead on in the term it had
(``leader-kept``), then all heal.

Judged by their monotonic clocks, F and W have not heard M for ``STOP_S``: F asks for
a pre-vote at its first tick, W may read that ask before M has run to send an append
and grant it (and then the vote, or take F's term), and W may ask for one itself; M is
deposed, for a silence W never observed because it was not running. By the time their
tick threads ran through (``cluster/raft/awake_clock.py``) a stop counts as one step:
neither asks, W refuses, and M's append arrives within a heartbeat. The canary
``no-awake-clock`` puts the monotonic clock back.
"""

from __future__ import annotations

from ..scripted import S, Scenario, Step, check_leader_kept, cut_a_follower, settled

STOP_S = 1.0
AHEAD_S = 0.02
HELD_S = 2.0


def plan() -> list[Step]:
    cast: dict = {}

    def cut_and_stall(world) -> None:
        follower = cut_a_follower(world, 5, cast)
        for node in world.nodes:
            on, _ = world.stop(node.name, STOP_S - AHEAD_S if node is follower else STOP_S)
            on()

    def held(world) -> bool:
        return world.clock.ns - cast["at"] >= (STOP_S + HELD_S) * S

    def check_and_heal(world) -> None:
        stall = f"every node stopped for {STOP_S} s, resuming {HELD_S} s ago"
        check_leader_kept(world, cast, f"{cast['follower']} was cut from it and {stall}")

    return [
        Step(
            f"a master, 5 entries applied everywhere: cut a follower from it; all stop for {STOP_S} s",
            lambda w: settled(w, 5) is not None,
            cut_and_stall,
        ),
        Step(
            f"{HELD_S} s after the stall the master leads in the same term: heal",
            held,
            check_and_heal,
            within_s=STOP_S + HELD_S + 1,
        ),
    ]


SCENARIO = Scenario("stalled-machine", nodes=3, plan=plan)
