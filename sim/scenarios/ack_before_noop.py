"""A new master asked for messages before it applied an entry of its own term, while an
ack its predecessor answered is in its log, committed, not yet applied (node services).

Three nodes with their services and the workload's consumers. Follower C is cut off and
falls behind. When the master A answers an ack whose lease ends within the next second,
and follower B has not applied what A has (it learns of a commit at A's next append), A
is cut off, and B and C reach each other, 50 ms apart. B wins the election (C's log is
behind) and appends its no-op; C's first answers refuse (it lacks entries) yet give B its
read lease and clock readings. Until C has caught up and B's no-op commits, B has not
applied the ack: a pull that B serves then hands the acked message out again, its lease
over (acked-handed-out-again). A new master serves only once it has applied an entry of
its term (``NodeService.require_master``).
"""

from __future__ import annotations

from ..scripted import Scenario, Step, cut, join, last_index, leader, set_delay, settled

BEHIND = 40  # entries C lacks before the ack is looked for
LEASE_ENDS_MS = 0  # the acked message's lease ends within this of the ack's answer
DELAY_MS = 60  # each way between B and C once they reach each other
TIMEOUT_S = 0.4  # the clients' (a pull waits up to 200 ms, then its leases commit)
A_TO_B_MS = 30  # A's appends to B, so that B learns of a commit well after A applied it


def plan() -> list[Step]:
    cast: dict = {}

    def cut_c(world) -> None:
        a = settled(world, 5)
        names = [n.name for n in world.nodes if n.name != a.name]
        cast.update(a=a.name, b=names[0], c=names[1])
        cut(world, a.name, cast["c"])
        cut(world, cast["b"], cast["c"])
        cast["a_to_b"] = set_delay(world, a.name, cast["b"], A_TO_B_MS)  # B learns commits late
        cast["acks"] = set(world.workload.acked_ms)
        world.workload.timeout_s = TIMEOUT_S  # a pull held by the cut-off A is given up soon

    def ack_b_has_not_applied(world) -> bool:
        a, b, c = (world.by_name[cast[k]] for k in "abc")
        workload = world.workload
        fresh = set(workload.acked_ms) - cast["acks"]
        cast["acks"] |= fresh
        if last_index(b) < last_index(c) + BEHIND or not a.raft._isLeader():
            return False
        if b.raft.raftCommitIndex >= a.raft.raftLastApplied:
            return False
        now = world.clock.wall_ms()
        for key in sorted(fresh):
            lease = workload.handouts[key][-1].lease_until
            if lease <= now + LEASE_ENDS_MS:
                cast["acked"] = key
                return True
        return False

    def cut_a(world) -> None:
        world.note(f"script: {cast['acked'][0]}/{cast['acked'][1]} acked on {cast['a']}")
        cut(world, cast["a"], cast["b"])
        join(world, cast["b"], cast["c"])
        cast["delays"] = [
            (path, set_delay(world, *path, DELAY_MS))
            for path in ((cast["b"], cast["c"]), (cast["c"], cast["b"]))
        ]

    def b_applied_its_term(world) -> bool:
        b = world.by_name[cast["b"]]
        lead = leader(world)
        return (
            lead is b
            and b.service is not None
            and b.service.view.reads.meta("applied_term") == b.raft.status.term
        )

    def heal(world) -> None:
        for (src, dst), saved in cast["delays"]:
            world.network.delay[(world.by_name[src].address, world.by_name[dst].address)] = saved
        world.heal()

    return [
        Step(
            "a master A, 5 entries applied everywhere: C cut off", lambda w: settled(w, 5) is not None, cut_c
        ),
        Step(
            f"C {BEHIND} entries behind; A answered an ack B has not applied, its lease near its end: "
            f"A cut off, B and C {DELAY_MS} ms apart",
            ack_b_has_not_applied,
            cut_a,
            within_s=20.0,
        ),
        Step("B leads and applied an entry of its term: heal", b_applied_its_term, heal, within_s=8.0),
    ]


SCENARIO = Scenario(
    "ack-before-noop", nodes=3, plan=plan, knobs={"log_compaction_min_entries": 50_000}, service=True
)
