"""Every node loses power right after the client's produce is acknowledged.

The client holds until every node has applied its whole log, then makes one produce: the
followers write it and answer, the master commits and applies it and acknowledges, and
the followers learn of the commit only at the master's next append. When the power goes
then, the entry survives where it was synced (cluster/raft/journal.py, the durability
rule): on the master, and on the follower whose answer counted. Without any sync
(pysyncobj's own journal), a node had applied what its disk no longer holds and the
acknowledged entry is gone. Files keep what was fsynced, their unsynced tails dropped,
torn or zeroed (sim/disk.py); the nodes restart 0.1-1 s later.
"""

from __future__ import annotations

from horologe.cluster import PRODUCE

from ..scripted import Scenario, Step, last_index, leader, settled
from ..world import MS


def plan() -> list[Step]:
    cast: dict = {}

    def hold(world) -> None:
        world.client.paused = True

    def one_produce(world) -> None:
        lead = leader(world)
        cast["acked"] = len(world.acked)
        world.at(MS // 10, "loop", lead.name, world.request, lead, lead.incarnation, PRODUCE)

    def lose_power(world) -> None:
        for node in world.nodes:
            node.lose_power()
        for node in world.nodes:
            world.at(world.rng.randrange(100 * MS, 1000 * MS), "fault", None, world.restart_of(node.name))

    def back(world) -> bool:
        return all(n.alive and n.restart_check is None for n in world.nodes) and leader(world) is not None

    def heal(world) -> None:
        world.client.paused = False
        world.heal()

    return [
        Step("a master, 5 entries applied everywhere: the client holds", _settled, hold),
        Step("every node applied every entry in its log: one produce", _quiet, one_produce),
        Step(
            "it is acknowledged: every node loses power", lambda w: len(w.acked) > cast["acked"], lose_power
        ),
        Step("all restarted on what they synced, a master elected: heal", back, heal),
    ]


def _settled(world) -> bool:
    return settled(world, 5) is not None


def _quiet(world) -> bool:
    """Every node has applied the leader's whole log (nothing left to apply, and so to sync)."""
    lead = settled(world, 5)
    if lead is None:
        return False
    last = last_index(lead)
    return all(n.raft.raftLastApplied == last == last_index(n) for n in world.nodes)


SCENARIO = Scenario("power-after-ack", nodes=3, plan=plan, power_loss=True)
