"""Changes of the membership drawn by a seed (``--membership``), made as an operator makes
them (``horologe cluster add/remove``: the master's ``RaftNode.change_membership``) while
the seed's other faults run.

A seed draws, from a stream of its own (``seed/members``), whether to change the
membership at all and when to start; then the changes, made one after the other: add the
first spare (``n4`` of 3 nodes); then maybe remove a member that does not lead when first
asked (a replacement); then maybe add the second spare. Each change is asked of the node
that leads (the live one at the highest term), again every 100 ms while none leads or the
answer says the change was not made, until the heal. A change counts as made only once
its master says it committed; then the world's members follow it at once (a
removed node is crashed for good, as an operator stops it).

Any other answer may hide a change that was made after all (``not_committed``: the master
lost its lead with the change proposed; ``member_exists`` or ``not_a_member``: an earlier
ask was made, but perhaps only in a log that a new master cuts). Then the world's members
are unsure until after the heal: once one node leads and has committed every entry of
its log, that log's membership is the one committed, and the world's members become it
(:meth:`MembershipChanges.settled`). The heal's recovery waits for that, and for an ask
still unanswered; both count against the heal's liveness bound.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .world import SimNode, World

RETRY_NS = 100_000_000
# Answers after which the change may have been made all the same.
MAYBE_MADE = {"not_committed", "member_exists", "not_a_member"}


class MembershipChanges:
    """The drawn changes of one seed, and the driver that asks for them."""

    def __init__(self, world: World, seed: int) -> None:
        rng = random.Random(f"{seed}/members")
        self.world = world
        self.wanted = rng.random() < 0.7
        self.start_s = rng.uniform(1.0, world.profile.faults_s - 1.0)
        first, second = (n.name for n in world.all_nodes[world.profile.nodes :])
        self.plan: list[tuple[str, str | float]] = [("add", first)]
        if rng.random() < 0.7:
            self.plan.append(("rem", rng.random()))  # which non-leader: picked when first asked
        if rng.random() < 0.4:
            self.plan.append(("add", second))
        self.done = 0  # changes of the plan made (or perhaps made)
        self.asking: tuple[SimNode, int] | None = None  # the master asked, its incarnation
        self.unsure = False  # an answer may hide a change made: the members are settled later

    def describe(self) -> str:
        steps = [f"{kind} {who if kind == 'add' else 'a non-leader'}" for kind, who in self.plan]
        return "membership: " + ", then ".join(steps)

    # -- asking -------------------------------------------------------------------------

    def begin(self) -> None:
        self.world.at(0, "fault", None, self.ask)

    def ask(self) -> None:
        world = self.world
        if self._awaiting():
            world.at(RETRY_NS, "fault", None, self.ask)
            return
        if world.phase != "faults" or self.done == len(self.plan):
            return
        lead = self.leader()
        if lead is None:
            world.at(RETRY_NS, "fault", None, self.ask)
            return
        kind, who = self.plan[self.done]
        if isinstance(who, float):
            others = [n.name for n in world.nodes if n is not lead]
            who = others[int(who * len(others))]
            self.plan[self.done] = (kind, who)
        self.asking = (lead, lead.incarnation)
        world.note(f"membership: ask {lead.name} to {kind} {who}")
        world.change_membership(kind, who, lead, answered=self.answered)
        world.at(RETRY_NS, "fault", None, self.ask)

    def answered(self, why: tuple[str, str] | None) -> None:
        """The master's answer (``World.change_membership`` made the members follow a change made)."""
        self.asking = None
        if why is None:
            self.done += 1
            return
        if why[0] in MAYBE_MADE:
            self.unsure = True
            if why[0] != "not_committed":  # an earlier ask of this change was made somewhere
                self.done += 1

    def _awaiting(self) -> bool:
        """Whether an ask waits for its answer: not once the master asked went down (its
        answer never comes, and the change may have been made)."""
        if self.asking is None:
            return False
        node, incarnation = self.asking
        if node.incarnation == incarnation:
            return True
        self.asking, self.unsure = None, True
        return False

    def leader(self) -> SimNode | None:
        """The live node that leads at the highest term, of every node made: a spare the
        world does not count as a member yet may lead too."""
        leading = [n for n in self.world.all_nodes if n.raft is not None and n.raft._isLeader()]
        return max(leading, key=lambda n: n.raft.current_term(), default=None)

    # -- after the heal -----------------------------------------------------------------

    def settled(self) -> bool:
        """Whether the world's members are known: no ask unanswered and, if an answer left
        them unsure, the world's members made the committed ones (True once they are)."""
        if self._awaiting():
            return False
        if not self.unsure:
            return True
        lead = self.leader()
        if lead is None:
            return False
        raft = lead.raft
        if raft._get_entries(raft.raftCommitIndex + 1):
            return False  # entries not yet committed: one may be a change
        last = raft._get_entries(raft.raftCommitIndex)
        if len(last) != 1 or last[0][2] != raft.current_term():
            return False  # no entry of its term committed yet
        world = self.world
        members = set(world.membership_of(lead))
        world.note(f"membership: settled as {lead.name}'s committed log has it: {sorted(members)}")
        for node in [n for n in world.nodes if n.name not in members]:
            world.nodes.remove(node)
        for name in sorted(members - {n.name for n in world.nodes}):
            world.nodes.append(world.by_name[name])
        for node in world.all_nodes:
            if node not in world.nodes:
                world.retired.add(node.name)  # removed, or a spare never added: stopped
                node.crash()
            elif not node.alive:
                node.start()
        self.unsure = False
        return True
