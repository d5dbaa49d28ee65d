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

from ..scripted import Scenario, Step, leader, quiet, settled
from ..world import MS


def plan() -> list[Step]:
    cast: dict = {}

    def one_produce(world) -> None:
        lead = leader(world)
        cast["acked"] = len(world.acked)
        world.at(MS // 10, "loop", lead.name, world.request, lead, lead.incarnation, PRODUCE)

    return [
        Step("a master, 5 entries applied everywhere: the client holds", settled_5, hold),
        Step("every node applied every entry in its log: one produce", quiet_5, one_produce),
        Step(
            "it is acknowledged: every node loses power", lambda w: len(w.acked) > cast["acked"], lose_power
        ),
        Step("all restarted on what they synced, a master elected: heal", all_back, resume),
    ]


def settled_5(world) -> bool:
    return settled(world, 5) is not None


def quiet_5(world) -> bool:
    return quiet(world, 5) is not None


def hold(world) -> None:
    world.client.paused = True


def lose_power(world) -> None:
    """Every node loses power; each restarts 0.1-1 s later."""
    for node in world.nodes:
        node.lose_power()
    for node in world.nodes:
        world.at(world.rng.randrange(100 * MS, 1000 * MS), "fault", None, world.restart_of(node.name))


def all_back(world) -> bool:
    return all(n.alive and not n.restart_check for n in world.nodes) and leader(world) is not None


def resume(world) -> None:
    world.client.paused = False
    world.heal()


SCENARIO = Scenario("power-after-ack", nodes=3, plan=plan, power_loss=True, client_alone=True)
