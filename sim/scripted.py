"""Scripted scenarios: a short fault plan whose steps fire on state changes, not at drawn
times ("cut the master's links once it holds entries it cannot commit"). The world,
the network, the client and every invariant are those of a random seed; the seed still
draws everything else (delays, ticks, the client's work, election timeouts).

A step fires at the first check after its condition holds (after every step of the
world), in order; a step that does not come within its ``within_s`` of the previous one
ends the run as ``script-stuck`` (the scenario no longer reaches its window). The last
step heals (``World.heal``): then the run goes on as a random seed's does after its heal
(liveness, the restart of all, the end checks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .network import LINK_BYTES_PER_S, OPEN, REJECT

if TYPE_CHECKING:
    from .world import SimNode, World

S = 1_000_000_000


@dataclass(frozen=True)
class Step:
    what: str
    when: Callable[[World], bool]
    do: Callable[[World], None]
    within_s: float = 5.0


@dataclass(frozen=True)
class Scenario:
    """``plan()`` makes a fresh list of steps for one run (they may share a cast: who leads,
    who was cut); ``knobs`` override the seed's draws (ClusterSettings fields);
    ``bytes_per_s`` is every link's bandwidth (None: unbounded); ``spares`` nodes are made
    to join later (``World.change_membership``); with ``power_loss`` a step may call
    ``SimNode.lose_power``; with ``service`` every node runs its NodeService under the
    workload (``--service``)."""

    name: str
    nodes: int
    plan: Callable[[], list[Step]]
    knobs: dict = field(default_factory=dict)
    bytes_per_s: int | None = LINK_BYTES_PER_S
    spares: int = 0
    power_loss: bool = False  # a step loses power (sim/disk.py records every fsync)
    service: bool = False  # node services and the workload's clients (sim/service.py)
    # Its steps wait for the scripted client's entries alone (a quiet log, a count of
    # entries held): under the workload's clients they may never come, so ``--service``
    # is refused for it.
    client_alone: bool = False


class Script:
    """One run's progress through a scenario's steps."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.steps = scenario.plan()
        self.done = 0
        self.since_ns = 0

    def start(self, world: World) -> None:
        self.since_ns = world.clock.ns

    def advance(self, world: World) -> None:
        from .world import Violation

        now = world.clock.ns
        while self.done < len(self.steps):
            step = self.steps[self.done]
            if not step.when(world):
                if now - self.since_ns > step.within_s * S:
                    state = " ".join(n.summary() for n in world.nodes)
                    raise Violation(
                        "script-stuck",
                        f"{self.scenario.name} step {self.done + 1} ({step.what}) did not come within "
                        f"{step.within_s} s: {state}",
                    )
                return
            self.done += 1
            self.since_ns = now
            world.faults.append(f"{now / S:.3f} step {self.done}: {step.what}")
            world.note(f"script step {self.done}: {step.what}")
            step.do(world)


# -- what steps look at and do ----------------------------------------------------------


def leader(world: World, among: list[str] | None = None) -> SimNode | None:
    """The live node that leads at the highest term (of ``among``, if given)."""
    leading = [
        n
        for n in world.nodes
        if n.raft is not None and n.raft._isLeader() and (among is None or n.name in among)
    ]
    return max(leading, key=lambda n: n.raft.current_term(), default=None)


def members(world: World) -> list[str]:
    """The names of the membership's nodes, as the world follows its changes."""
    return [n.name for n in world.nodes]


def add_member(name: str) -> Callable[[World], None]:
    """A step's action: the membership's leader adds spare ``name``."""

    def add(world: World) -> None:
        world.change_membership("add", name, leader(world, members(world)))

    return add


def settled(world: World, entries: int) -> SimNode | None:
    """The leader, once it committed ``entries`` or more and every node applied its commit."""
    lead = leader(world)
    if lead is None or lead.raft.raftCommitIndex < entries:
        return None
    commit = lead.raft.raftCommitIndex
    return lead if all(n.raft is not None and n.raft.raftLastApplied >= commit for n in world.nodes) else None


def quiet(world: World, entries: int) -> SimNode | None:
    """The leader, once it committed ``entries`` or more and every node applied its whole
    log (nothing left to apply, and so to sync)."""
    lead = settled(world, entries)
    if lead is None:
        return None
    last = last_index(lead)
    return lead if all(n.raft.raftLastApplied == last == last_index(n) for n in world.nodes) else None


def last_index(node: SimNode) -> int:
    return node.raft._journal.last_idx


def last_term(node: SimNode) -> int | None:
    journal = node.raft._journal
    return journal.term_at(journal.last_idx)


def first_index(node: SimNode) -> int:
    journal = node.raft._journal
    return journal[0][1] if len(journal) else 0


def compacted_past(world: World, name: str) -> bool:
    """Every other node is up and its log begins past ``name``'s last entry + 1, so that
    ``name``, back, is caught up by a snapshot shipment."""
    last = last_index(world.by_name[name])
    others = [n for n in world.nodes if n.name != name]
    return all(n.alive and first_index(n) > last + 1 for n in others)


def cut(world: World, a: str, b: str, how: str = REJECT) -> None:
    """Both directions between ``a`` and ``b``: ``reject`` (reset, connects refused) or ``drop``."""
    for x, y in ((a, b), (b, a)):
        world.network.set_path(world.by_name[x].address, world.by_name[y].address, how)


def cut_a_follower(world: World, entries: int, cast: dict) -> SimNode:
    """Once the leader is :func:`settled` at ``entries``: its links with a follower cut
    both ways; ``cast`` gets the ``master``, its ``term``, the ``follower`` and when
    (``at``, ns), for :func:`check_leader_kept`. Returns the follower."""
    master = settled(world, entries)
    follower = next(n for n in world.nodes if n is not master)
    cast.update(master=master.name, term=master.raft.current_term(), follower=follower.name)
    cast["at"] = world.clock.ns
    cut(world, master.name, follower.name)
    return follower


def check_leader_kept(world: World, cast: dict, what: str) -> None:
    """``leader-kept``: the cast's master still leads in the term it had (``what``: the
    fault since then, for the failure's message); then all heal."""
    from .world import Violation

    now = leader(world)
    seen = (now.name, now.raft.current_term()) if now is not None else None
    if seen != (cast["master"], cast["term"]):
        raise Violation(
            "leader-kept",
            f"{cast['master']} led in term {cast['term']} when {what}; now the leader (name, term) is {seen}",
        )
    world.heal()


def join(world: World, a: str, b: str) -> None:
    cut(world, a, b, OPEN)


def set_delay(world: World, src: str, dst: str, ms: int) -> tuple[int, int]:
    """One direction's delay (jitter kept); returns what it was, for the heal."""
    path = (world.by_name[src].address, world.by_name[dst].address)
    saved = world.network.delay[path]
    world.network.delay[path] = (ms * 1_000_000, saved[1])
    return saved
