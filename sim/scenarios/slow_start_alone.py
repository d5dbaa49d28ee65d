"""The first node of a cluster grown by adds restarts, and its start takes longer than an
election timeout: it must not lead on the membership it was configured with.

n1 starts alone (its config lists no peers, as the first node of a cluster grown one
node at a time); n2 and n3 are added. n1 crashes; n2 and n3 elect a master, which
commits ``AHEAD`` entries n1 lacks. n1 restarts and stops (SIGSTOP) for ``STOP_S``
before its first tick, as a start reading a long journal does. Then all heal, under
every invariant: one leader per term, every acknowledged entry kept.

At its first tick n1 knows only the configured membership (itself) until the tick's
callbacks take the one its log holds (n1, n2, n3). Standing by the configured one it is
alone: it stands and leads at once, in a term the others may have led in, with a log
that lacks their committed entries. The canary ``no-membership-first`` lets the first
tick stand.
"""

from __future__ import annotations

from ..scripted import Scenario, Step, add_member, leader, members, settled

AHEAD = 5
STOP_S = 1.0


def plan() -> list[Step]:
    cast: dict = {}

    def crash_n1(world) -> None:
        n1 = world.by_name["n1"]
        cast["held"] = n1.raft.raftCommitIndex
        n1.crash()

    def others_ahead(world) -> bool:
        lead = leader(world, ["n2", "n3"])
        return lead is not None and lead.raft.raftCommitIndex >= cast["held"] + AHEAD

    def restart_n1_slowly(world) -> None:
        world.by_name["n1"].start()
        on, _ = world.stop("n1", STOP_S)
        on()

    return [
        Step(
            "n1 leads alone, 5 entries applied: add n2", lambda w: settled(w, 5) is not None, add_member("n2")
        ),
        Step(
            "n2 is a member: add n3",
            lambda w: "n2" in members(w) and settled(w, 1) is not None,
            add_member("n3"),
            within_s=15.0,
        ),
        Step(
            "n3 is a member: crash n1",
            lambda w: "n3" in members(w) and settled(w, 1) is not None,
            crash_n1,
            within_s=15.0,
        ),
        Step(
            f"n2 or n3 leads, {AHEAD} entries past n1's log committed: restart n1, stopped {STOP_S} s",
            others_ahead,
            restart_n1_slowly,
            within_s=15.0,
        ),
        Step(
            "n1 ran its first ticks: heal",
            lambda w: w.by_name["n1"].alive and not w.by_name["n1"].restart_check,
            lambda w: w.heal(),
            within_s=STOP_S + 5,
        ),
    ]


SCENARIO = Scenario("slow-start-alone", nodes=1, plan=plan, spares=2)
