"""A follower's answer that reaches its old master only after that master lost the lead and
won it back, while the follower's log no longer matches the master's.

Five nodes. Master A is cut off from all but B, and B's answers to it take 2 s (a
congested direction). A appends entries it cannot commit; B takes them and answers. The
three others elect M, which then reaches A alone: A takes M's log (its own suffix is
cut) and M's next entries. M and B go down, A wins the next election with the two
others' votes (its log is ahead of theirs), and loses one of them again: it leads with
one follower that takes its entries. B's late answers, of A's first term,
name indexes where A now has entries of its new term that B never held. Counted, they
make a "majority" of A, B and the one follower, and A acknowledges entries that only
two nodes hold (acked-on-a-majority). A leader counts only answers of its own term.
"""

from __future__ import annotations

from ..scripted import Scenario, Step, cut, join, last_index, last_term, leader, set_delay, settled


def plan() -> list[Step]:
    cast: dict = {}

    def first_master(world) -> None:
        a = settled(world, 5).name
        names = [n.name for n in world.nodes if n.name != a]
        cast.update(a=a, b=names[0], rest=names[1:])
        world.client.believed = a
        cast["delay"] = set_delay(world, cast["b"], a, 2_000)
        for name in cast["rest"]:
            cut(world, a, name)
            cut(world, cast["b"], name)

    def b_holds_uncommitted_and_m_leads(world) -> bool:
        a, b = world.by_name[cast["a"]], world.by_name[cast["b"]]
        return last_index(b) >= a.raft.raftCommitIndex + 5 and leader(world, cast["rest"]) is not None

    def reach_m(world) -> None:
        cast["m"] = leader(world, cast["rest"]).name
        cast["voters"] = [n for n in cast["rest"] if n != cast["m"]]
        join(world, cast["a"], cast["m"])
        for name in cast["voters"]:
            cut(world, cast["m"], name)  # M's entries now reach A alone

    def a_took_more_of_m_log(world) -> bool:
        a, m = world.by_name[cast["a"]], world.by_name[cast["m"]]
        voters = max(last_index(world.by_name[n]) for n in cast["voters"])
        return last_term(a) == m.raft.current_term() and last_index(a) > voters

    def down_m_and_b(world) -> None:
        world.by_name[cast["m"]].crash()
        world.by_name[cast["b"]].crash()
        for name in cast["voters"]:
            join(world, cast["a"], name)  # A's log is ahead of theirs: only A can win

    def a_leads_again(world) -> bool:
        a = world.by_name[cast["a"]]
        m_term = max(t for t, name in world.leaders.items() if name == cast["m"])
        return a.alive and a.raft._isLeader() and a.raft.current_term() > m_term

    def lose_a_voter(world) -> None:
        a = world.by_name[cast["a"]]
        kept, lost = cast["voters"]
        cut(world, cast["a"], lost)
        cut(world, kept, lost)  # its elections would depose A through the other
        world.client.believed = cast["a"]
        cast["stale"] = a.raft.stale_answers

    def answer_of_the_first_term_arrived(world) -> bool:
        return world.by_name[cast["a"]].raft.stale_answers > cast["stale"]

    def heal(world) -> None:
        path = (world.by_name[cast["b"]].address, world.by_name[cast["a"]].address)
        world.network.delay[path] = cast["delay"]
        world.heal()

    return [
        Step(
            "a master A; cut it and B from the rest, B's answers to A take 2 s",
            lambda w: settled(w, 5) is not None,
            first_master,
        ),
        Step(
            "B holds 5 entries A cannot commit; M leads the rest: A reaches M, and M only A",
            b_holds_uncommitted_and_m_leads,
            reach_m,
        ),
        Step(
            "A took M's log, longer than the others': M and B down, A reaches the others",
            a_took_more_of_m_log,
            down_m_and_b,
        ),
        Step("A leads again: one of its voters is cut off", a_leads_again, lose_a_voter),
        Step(
            "A took (or dropped) a late answer of B's of its first term: heal",
            answer_of_the_first_term_arrived,
            heal,
            within_s=4.0,
        ),
    ]


SCENARIO = Scenario(
    "late-answer",
    nodes=5,
    plan=plan,
    knobs={"tick_s": 0.005, "log_compaction_min_entries": 50_000},
    # The links of every random seed. B comes back with a suffix of its own and is stepped
    # back one entry a round trip while the client proposes; the refusals of the leader's
    # earlier sends must not set its next index back up (no-refusal-floor), or it never
    # catches up (liveness).
    client_alone=True,
)
