"""A pull whose leases commit only after its master lost the lead answers nothing
(node services).

Three nodes with their services and the workload's consumers; the followers' answers to
master A take 40 ms, so A's entries wait a while uncommitted. Once consumer X's pull is
waiting on A while A holds an entry it has not committed and B holds it too (the pull's
leases, most often), A's links go silent both ways (a blackhole: A hears no reset and
leads on for its fallback timeout), and the other consumer Y gives a request up after
0.4 s, so it soon finds the next master. B, whose log holds A's entries, wins and commits
them with its no-op: X's leases hold in every log until they end, then B hands their
messages to Y. 1.7 s after the cut (before A steps down at 2 s) A's links come back: A
learns, as a follower, that its entries committed, and X's pull, waiting on them, may
answer. Answered then, it hands X leases that ended, on messages Y now holds
(handed-out-inside-a-lease). A pull answers only while its node leads and its leases
still hold (``Consumers._may_answer``).
"""

from __future__ import annotations

from ..network import DROP
from ..scripted import S, Scenario, Step, cut, last_index, set_delay, settled

ANSWER_DELAY_MS = 40  # the followers' answers to A
SILENT_S = 1.7  # A's links are silent this long: under pysyncobj's 2 s leader fallback
TIMEOUT_S = 0.4  # Y's requests (a pull waits up to 200 ms, then its leases commit)


def plan() -> list[Step]:
    cast: dict = {}

    def slow_answers(world) -> None:
        a = settled(world, 5)
        cast["a"] = a.name
        cast["rest"] = [n.name for n in world.nodes if n is not a]
        cast["delays"] = [
            ((name, a.name), set_delay(world, name, a.name, ANSWER_DELAY_MS)) for name in cast["rest"]
        ]

    def pull_waits_on_uncommitted(world) -> bool:
        a = world.by_name[cast["a"]]
        if not a.raft._isLeader() or a.raft.raftCommitIndex >= last_index(a):
            return False
        if max(last_index(world.by_name[name]) for name in cast["rest"]) < last_index(a):
            return False
        waiting = [c for c in world.workload.consumers if c.pending == ("pull", a.name)]
        if not waiting:
            return False
        cast["x"] = waiting[0]
        return True

    def silence_a(world) -> None:
        x = cast["x"]
        world.note(f"script: {x.name}'s pull waits on {cast['a']}")
        for y in world.workload.consumers:
            if y is not x:
                y.timeout_s = TIMEOUT_S
        for name in cast["rest"]:
            cut(world, cast["a"], name, DROP)
        cast["since"] = world.clock.ns

    def heal(world) -> None:
        for (src, dst), saved in cast["delays"]:
            world.network.delay[(world.by_name[src].address, world.by_name[dst].address)] = saved
        for y in world.workload.consumers:
            y.timeout_s = None
        world.heal()

    return [
        Step(
            f"a master A, 5 entries applied everywhere: its followers' answers take {ANSWER_DELAY_MS} ms",
            lambda w: settled(w, 5) is not None,
            slow_answers,
        ),
        Step(
            "a pull of X's waits on A, which holds an entry uncommitted that a follower holds too: "
            f"A's links silent, the other consumer's requests given up after {TIMEOUT_S} s",
            pull_waits_on_uncommitted,
            silence_a,
            within_s=10.0,
        ),
        Step(
            f"{SILENT_S} s later: heal",
            lambda w: w.clock.ns - cast["since"] >= SILENT_S * S,
            heal,
        ),
    ]


SCENARIO = Scenario(
    "answer-after-handover",
    nodes=3,
    plan=plan,
    knobs={"log_compaction_min_entries": 50_000},
    service=True,
)
