"""The master's fsync fails as it writes the client's produce; then every node loses power.

The client holds until every node has applied its whole log; the master's next fsync is
made to fail (EIO) and the client makes one produce. The master appends it to its journal
and syncs: the fsync fails, the pages it could not write are dropped (sim/disk.py), and
the master's process ends there (storage/durable.py) before it answers. Once it is down,
or the produce is acknowledged, every node loses power; all restart 0.1-1 s later. A
master that passed over the failure (as a retried fsync succeeds, "fsyncgate") applied and
acknowledged an entry its disk never held (applied-is-durable).
"""

from __future__ import annotations

import errno

from horologe.cluster import PRODUCE

from ..scripted import Scenario, Step, quiet
from ..world import MS
from .power_after_ack import all_back, hold, lose_power, quiet_5, resume, settled_5


def plan() -> list[Step]:
    cast: dict = {}

    def fail_and_produce(world) -> None:
        lead = quiet(world, 5)
        cast["master"], cast["incarnation"], cast["acked"] = lead, lead.incarnation, len(world.acked)
        world.disk.fail_fsync(lead.data_dir, 1, errno.EIO)
        world.at(MS // 10, "loop", lead.name, world.request, lead, lead.incarnation, PRODUCE)

    def gone_or_acked(world) -> bool:
        return cast["master"].incarnation != cast["incarnation"] or len(world.acked) > cast["acked"]

    return [
        Step("a master, 5 entries applied everywhere: the client holds", settled_5, hold),
        Step(
            "every node applied its whole log: the master's next fsync fails, one produce",
            quiet_5,
            fail_and_produce,
        ),
        Step(
            "the master is down, or the produce acknowledged: every node loses power",
            gone_or_acked,
            lose_power,
        ),
        Step("all restarted on what they synced, a master elected: heal", all_back, resume),
    ]


SCENARIO = Scenario("fsync-fails", nodes=3, plan=plan, power_loss=True, client_alone=True)
