"""A master whose clocks step back an hour, as libfaketime steps them (node services).

Three nodes with their services and the workload. Once a master has applied 20 entries
everywhere, its wall clock and its monotonic clock step back an hour together. Every
deadline it took before the step then lies an hour ahead: its wheel's next turn, its
Raft timers, its loop's sleeps. Its process ends itself at its next tick
(cluster/raft/monotonic_watch.py) and restarts 0.5 s later, by then a follower; another
node takes the wheel over. Within ``RESUME_S`` of the step, ``HANDED`` messages due after
it must have been handed out (the clients give a request up after ``TIMEOUT_S``).

With the exit taken away (canary ``no-monotonic-exit``) the scenario passes too: it is
a check of the exit's path, not a catch of that canary.
"""

from __future__ import annotations

from ..scripted import S, Scenario, Step, settled

STEP_MS = -3_600_000
RESUME_S = 1.6  # the exit, an election, the new master's first turns
HANDED = 5
RESTART_S = 0.5
TIMEOUT_S = 1.0  # the clients' (a dead process's connections reset at once; here they time out)


def plan() -> list[Step]:
    cast: dict = {}

    def step_back(world) -> None:
        master = settled(world, 20)
        cast["at_ms"] = world.clock.wall_ms()
        on, restart = world.clock_step(master.name, STEP_MS)
        on()
        world.at(int(RESTART_S * S), "fault", None, restart)

    def handed_after(world) -> bool:
        at_ms, workload = cast["at_ms"], world.workload
        due_after = {mid for mid, made in workload.produced.items() if min(made.times) > at_ms}
        handouts = workload.handouts.items()
        handed = {mid for (mid, _), hs in handouts if mid in due_after and hs[-1].at_ms > at_ms}
        return len(handed) >= HANDED

    def short_timeouts(world) -> None:
        world.workload.timeout_s = TIMEOUT_S

    return [
        Step(f"clients give a request up after {TIMEOUT_S} s", lambda w: True, short_timeouts),
        Step(
            f"a master, 20 entries applied everywhere: its clocks step {STEP_MS:+d} ms",
            lambda w: settled(w, 20) is not None,
            step_back,
        ),
        Step(
            f"{HANDED} messages due after the step handed out: heal",
            handed_after,
            lambda w: w.heal(),
            within_s=RESUME_S,
        ),
    ]


SCENARIO = Scenario("step-back", nodes=3, plan=plan, service=True)
