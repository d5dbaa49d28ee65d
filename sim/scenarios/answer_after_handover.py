"""A master cut off with a pull's leases uncommitted, back once the next master handed
their messages on (node services); two variants.

Three nodes with their services and the workload's consumers; the followers' answers to
master A take 40 ms, so A's entries wait a while uncommitted, and A leads on alone for
4 s (8 s in the first variant) before it steps down (pysyncobj's leader fallback, 2 s by
default). Once a pull of consumer X's waits on A while A holds leases it has not
committed and a follower holds them too, A's links go silent both ways (a blackhole: A
hears no reset), and the other consumer Y gives a request up after 0.4 s, so it soon
finds the next master. B, whose log holds A's entries, wins and commits them with its
no-op: X's leases hold in every log until they end (moved on by the time between A's
last entry and B's first: cluster/leases.py), then B may hand their messages to Y.

- ``answer-after-handover``: once X's leases ended, as B's log holds them, and a consumer
  was handed a message since (by the next master: A's pulls wait), or 7.5 s after the
  cut, A's links come back: A learns, as a follower, that its entries committed, and X's
  pull, waiting on them, may answer. Answered then, it hands X leases that ended, on
  messages another pull may hold now (handed-out-inside-a-lease). A pull answers only
  while its node leads and its leases still hold (``Consumers._answerable``).
- ``long-silence``: A's links come back 3.5 s after the cut. Its peers queued appends
  for it all the while; back, it refuses each. Those refusals must not each send it the
  rest of the log again (``RaftNode._refusal_as_raft_has_it``), or it is not caught up
  12 s after the heal (liveness).
"""

from __future__ import annotations

import pysyncobj.pickle

from horologe.cluster import ACK, decode
from horologe.cluster.leases import LeaseTable, lease_key

from ..network import DROP
from ..scripted import S, Scenario, Step, cut, last_index, set_delay, settled

ANSWER_DELAY_MS = 40  # the followers' answers to A
FALLBACK_S = 4.0  # pysyncobj's leader fallback (2 s by default): how long A leads on alone
SILENT_S = 3.5  # long-silence: A's links are silent this long, under its fallback
# answer-after-handover: X's leases end up to a visibility after B's first entry, so A
# leads on alone longer, and heals at the latest this long after the cut.
HANDED_ON_FALLBACK_S, HANDED_ON_SILENT_S = 8.0, 7.5
TIMEOUT_S = 0.4  # Y's requests (a pull waits up to 200 ms, then its leases commit)


def plan(handed_on: bool) -> list[Step]:
    """``handed_on``: heal once a consumer was handed a message after X's leases ended
    (else after ``SILENT_S``)."""
    cast: dict = {}
    silent_s = HANDED_ON_SILENT_S if handed_on else SILENT_S

    def slow_answers(world) -> None:
        a = settled(world, 5)
        cast["a"] = a.name
        cast["rest"] = [n.name for n in world.nodes if n is not a]
        cast["delays"] = [
            ((name, a.name), set_delay(world, name, a.name, ANSWER_DELAY_MS)) for name in cast["rest"]
        ]

    def pull_waits_on_uncommitted(world) -> bool:
        a = world.by_name[cast["a"]]
        leases = (
            uncommitted_leases(a.raft._get_entries(a.raft.raftCommitIndex + 1)) if a.raft._isLeader() else []
        )
        if not leases:
            return False
        if max(last_index(world.by_name[name]) for name in cast["rest"]) < last_index(a):
            return False
        waiting = [c for c in world.workload.consumers if c.pending == ("pull", a.name)]
        if not waiting:
            return False
        cast["x"] = waiting[0]
        cast["leases"] = leases
        cast["until"] = max(lease[4] for lease in leases)
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

    def x_leases_end(world) -> int:
        """When X's leases end as the others' logs hold them now (the latest seen): B's
        first entry moves them on by the time no master served."""
        for name in cast["rest"]:
            service = world.by_name[name].service
            if service is None:
                continue
            for group, topic, lo, hi, _until, token, _pull in cast["leases"]:
                runs = LeaseTable(service.view.reads.meta(lease_key(group, topic)))
                for r_lo, r_hi, r_until, r_token, *_ in runs:
                    if r_token == token and r_lo < hi and lo < r_hi:
                        cast["until"] = max(cast["until"], r_until)
        return cast["until"]

    def handed_after_x_leases(world) -> bool:
        """(or, so that A heals while it still leads, ``silent_s`` after the cut)"""
        until = x_leases_end(world)
        if world.clock.ns - cast["since"] >= silent_s * S:
            return True
        return world.clock.wall_ms() > until and any(
            h.at_ms > until for handed in world.workload.handouts.values() for h in handed
        )

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
            "a pull of X's waits on A, which holds leases uncommitted that a follower holds too: "
            f"A's links silent, the other consumer's requests given up after {TIMEOUT_S} s",
            pull_waits_on_uncommitted,
            silence_a,
            within_s=10.0,
        ),
        Step(
            "X's leases ended and a consumer was handed a message since: heal",
            handed_after_x_leases,
            heal,
            within_s=HANDED_ON_SILENT_S + 1,
        )
        if handed_on
        else Step(f"{SILENT_S} s later: heal", lambda w: w.clock.ns - cast["since"] >= SILENT_S * S, heal),
    ]


def uncommitted_leases(entries) -> list[tuple]:
    """The lease items these journal entries take (A entries; pysyncobj's command is a
    type byte, then the pickled ``(method id, args)`` of ``apply_entry``), as
    ``lease_item`` reads them."""
    leases = []
    for command, _index, _term in entries:
        try:
            entry = decode(pysyncobj.pickle.loads(command[1:])[1][0])
        except Exception:  # noqa: BLE001, S112 - a no-op or a membership change: no call
            continue
        if entry.kind == ACK:
            leases += [lease for lease in entry.leases if lease[4] > 0]
    return leases


KNOBS = {"log_compaction_min_entries": 50_000, "leader_fallback_timeout": FALLBACK_S}
SCENARIO = Scenario(
    "answer-after-handover",
    nodes=3,
    plan=lambda: plan(True),
    knobs={**KNOBS, "leader_fallback_timeout": HANDED_ON_FALLBACK_S},
    service=True,
)
LONG_SILENCE = Scenario("long-silence", nodes=3, plan=lambda: plan(False), knobs=KNOBS, service=True)
