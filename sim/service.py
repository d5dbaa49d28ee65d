"""Each simulated node as the real ``NodeService`` (with ``--service``): the wheel driver,
group commit, consumers and their replicated leases, the quorum clock, releases and
hand-overs, retention and schedules, on the node's own asyncio loop (sim/loop.py).

The service is built as node/main.py builds it, with four of its constructor's seams:
the store's small layout, a ``RaftNode`` that the world ticks on its network and
crossing, a peer's ``/readyz`` read from that node's service across the simulated
network instead of over HTTP (a clock hand-over asks it of its target), and, with
``--push``, the push worker's requests sent to the simulated receiver (sim/push.py).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from horologe.cluster.raft.node import RaftNode
from horologe.node.config import NodeConfig
from horologe.node.service import NodeService

from . import push
from .loop import SimLoop
from .network import OPEN

if TYPE_CHECKING:
    from .world import SimNode

# Retries come back within a run (the default levels are 10 s and more).
RETRY_LEVELS_MS = (300, 1_000)
# With --schedules: firings planned 1 s ahead (the least the config allows), refilled once
# less than 0.5 s is left and looked at every 100 ms, so a run's masters plan many times
# over and an outage of more than 0.5 s leaves fire times passed and unplanned.
SCHEDULE_HORIZON_MS = 1_000
SCHEDULE_CONFIG = {"schedule_horizon_ms": SCHEDULE_HORIZON_MS, "schedule_check_ms": 100}
# With --retention: delivered data goes 300 ms after its delivery, once every group passed
# it (a master looks every 100 ms, the least the config allows), and a ready segment
# closes every 500 ms of deliveries, so a run's ready logs are trimmed and its first hour
# (the world's clock starts 4 s before an hour) removed.
RETENTION_CONFIG = {"retention_ms": 300, "retention_check_ms": 100}
READY_SEGMENT_SPAN_MS = 500
# The nodes' fire lead (the config's default): the wheel fires what falls due this far
# ahead of its clock, so a pause cancels only firings due later than that (a hot stretch,
# more than fire_batch_limit due within the lead, never comes in a run).
FIRE_LEAD_MS = NodeConfig.__dataclass_fields__["fire_lead_ms"].default


def http_of(name: str) -> str:
    """A node's HTTP address, in its config and its peers' (never dialled: ``readiness`` reads
    the service of the node it names)."""
    return f"{name}.sim:80"


def build(node: SimNode, crossing, monotonic_step, storage_config) -> tuple[NodeService, SimLoop]:
    """The node's service and loop, not started (:func:`start`)."""
    world = node.world
    settings = node.settings
    chosen = world.profile.sync_interval_ms
    config = NodeConfig(
        node_id=node.name,
        data_dir=node.data_dir,
        http=http_of(node.name),
        raft=node.address,
        peers=settings.peers,
        join=settings.join,
        insecure_dev=True,
        log_compaction_min_entries=settings.log_compaction_min_entries,
        retry_levels_ms=RETRY_LEVELS_MS,
        loop_lag_probe_ms=0,
        **({} if chosen is None else {"sync_interval_ms": chosen}),
        **(SCHEDULE_CONFIG if world.profile.schedules else {}),
        **(RETENTION_CONFIG if world.profile.retention else {}),
        **({"push_allow": (push.RECEIVER,)} if world.profile.push else {}),
    )

    def make_raft(_settings, state, _crossing, on_applied, on_role, **kw) -> RaftNode:
        return RaftNode(
            settings,  # the world's: its knobs (ticks, compaction, shipping) drawn from the seed
            state,
            crossing,
            on_applied,
            on_role,
            auto_tick=False,
            on_monotonic_step=monotonic_step,
            transport_class=world.transport_class,
            **kw,
        )

    async def readiness(url: str, timeout_s: float) -> dict | None:
        """``/readyz`` of the node at ``url``: its service's answer after a round trip, or
        None at the timeout when it is down or a path between the two is not open."""
        target = world.by_name.get(url.split("//", 1)[-1].split(".", 1)[0])
        paths = world.network.paths
        up = target is not None and target.service is not None and target.paused_until_ns <= world.clock.ns
        both = ((node.address, target.address), (target.address, node.address)) if up else ()
        if up and all(paths.get(p, OPEN) == OPEN for p in both):
            await asyncio.sleep(world.rng.randrange(200, 2_000) / 1e6)
            # ended meanwhile: the connection resets, and the caller hears nothing
            return None if target.service is None else target.service.readiness()
        await asyncio.sleep(timeout_s)
        return None

    loop = SimLoop()
    pushes = world.workload.pushes if world.profile.push else None
    service = NodeService(
        config,
        node.wall_ms,
        storage_config=storage_config,
        make_raft=make_raft,
        peer_readiness=readiness,
        push_http=None if pushes is None else (lambda: push.SimPushHttp(node, pushes)),
    )
    if pushes is not None:
        pushes.watch(service)
    return service, loop


def start(service: NodeService, loop: SimLoop) -> None:
    """``await service.start()``, which waits on nothing: run to its end now, as on the loop."""
    asyncio.events._set_running_loop(loop)
    try:
        coro = service.start()
        try:
            coro.send(None)
        except StopIteration:
            return
        raise RuntimeError("NodeService.start waited: the simulator starts it in one step")
    finally:
        asyncio.events._set_running_loop(None)


def raft_has_work(raft: RaftNode) -> bool:
    """Whether the loop left the tick something to do: a proposal queued, or a question
    for the writer (pysyncobj's poll would return at once)."""
    queued = raft._SyncObj__commandsQueue._FastQueue__queue  # syncobj.py:262, fast_queue.py:12
    return bool(queued) or bool(raft._questions._asked)
