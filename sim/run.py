"""One seed, run in this process: the world built, run, checked, and its result.

A seed replays bit for bit only under the same ``PYTHONHASHSEED`` (pysyncobj iterates sets
of nodes, whose order follows string hashes): :func:`hashseed_for` derives it from the seed,
and :func:`run_seed` refuses to run under another (``python -m sim`` starts its processes
with the right one).
"""

from __future__ import annotations

import logging
import os
import platform
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import NamedTuple

import pysyncobj.syncobj
from pysyncobj.version import VERSION as PYSYNCOBJ_VERSION

from horologe.cluster.raft.dump_file import DumpWriter

from . import canaries
from .clock import patched
from .hash_seeds import hashseed_for
from .scenarios import SCENARIOS
from .scripted import Script
from .world import Profile, S, Violation, World, fresh_dir

BURIED: list = []  # what crashed nodes left, kept to the process's end (os._exit)


def sim_root() -> str:
    shm = "/dev/shm"
    base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else tempfile.gettempdir()
    return os.path.join(base, f"horologe-sim-{os.getuid()}")


@dataclass
class Result:
    seed: int
    hashseed: int
    nodes: int
    ok: bool
    canary: str | None = None
    scenario: str | None = None
    invariant: str | None = None
    detail: str | None = None
    trace_hash: str = ""
    steps: int = 0
    virtual_s: float = 0.0
    wall_s: float = 0.0
    faults: list[str] = field(default_factory=list)
    knobs: dict = field(default_factory=dict)
    answers: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)  # what the world counted (World.count)
    acked: int = 0
    delivered: int = 0
    messages: int = 0
    trace_tail: list[str] = field(default_factory=list)

    def line(self) -> str:
        key = f"seed={self.seed} hashseed={self.hashseed} nodes={self.nodes}"
        if self.scenario:
            key += f" scenario={self.scenario}"
        if self.canary:
            key += f" canary={self.canary}"
        what = "ok" if self.ok else f"FAIL {self.invariant}: {self.detail}"
        return (
            f"{key} {what} | {self.steps} steps, {self.virtual_s:.1f} virtual s in {self.wall_s:.2f} s, "
            f"{self.acked} acked, trace {self.trace_hash[:16]}"
        )

    def to_dict(self) -> dict:
        return asdict(self)


class _TraceLog(logging.Handler):
    """The product's warnings go to the trace; pysyncobj's "truncating already-applied log
    entries" is a violation (a committed entry cut from a log)."""

    def __init__(self, world: World) -> None:
        super().__init__(logging.WARNING)
        self.world = world

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage().replace(self.world.base_dir, "<base>")  # it holds the pid
        self.world.note(f"log {record.levelname} {record.name}: {msg[:300]}")
        if "waiting for a newer dump" in msg:  # cluster/raft/snapshot_stream.py: a file of it is gone
            self.world.count("shipments that waited for a newer dump")
        if "truncating already-applied" in msg and self.world.pending_violation is None:
            self.world.pending_violation = Violation("applied-never-cut", msg)


class Mode(NamedTuple):
    """What a run draws beyond the Raft core's faults: power losses and failed fsyncs
    (sim/disk.py), node services with producers and consumers (sim/service.py), changes of
    the membership (sim/membership.py)."""

    power_loss: bool = False
    service: bool = False
    membership: bool = False
    spares_first: bool = False  # the spares' addresses sort before the members' (the members dial them)
    commit_at_once: bool = False  # a leader tells its new commit index at once (pysyncobj's way)
    out_of_order: bool = False  # a power loss keeps unsynced sectors in no order
    timed_waits: bool = False  # each node ticks when its tick thread's wait ends, not on a grid
    hold: bool = False  # the workload's calls take the routes' master check, with its hold
    sync_interval_ms: int | None = None  # the node services' sync_interval_ms (None: the node's default)
    schedules: bool = False  # the workload creates, pauses and resumes a recurring schedule
    lateness: bool = False  # some messages carry a lateness policy: dropped or dead-lettered once late
    retention: bool = False  # retention cuts within a run: ready logs trimmed, the first hour removed
    push: bool = False  # a push subscription, its pushes sent to a simulated receiver

    def options(self) -> list[str]:
        """As ``python -m sim`` options."""
        return (
            ["--power-loss"] * self.power_loss
            + ["--service"] * self.service
            + ["--membership"] * self.membership
            + ["--spares-first"] * self.spares_first
            + ["--commit-at-once"] * self.commit_at_once
            + ["--out-of-order"] * self.out_of_order
            + ["--timed-waits"] * self.timed_waits
            + ["--hold"] * self.hold
            + ([] if self.sync_interval_ms is None else ["--sync-interval-ms", str(self.sync_interval_ms)])
            + ["--schedules"] * self.schedules
            + ["--lateness"] * self.lateness
            + ["--retention"] * self.retention
            + ["--push"] * self.push
        )

    def make_vars(self) -> str:
        """As ``make sim`` variables."""
        return (
            " POWER=1" * self.power_loss
            + " SERVICE=1" * self.service
            + " MEMBERS=1" * self.membership
            + " SPARES_FIRST=1" * self.spares_first
            + " COMMIT_AT_ONCE=1" * self.commit_at_once
            + " OUT_OF_ORDER=1" * self.out_of_order
            + " TIMED_WAITS=1" * self.timed_waits
            + " HOLD=1" * self.hold
            + ("" if self.sync_interval_ms is None else f" SYNC_INTERVAL_MS={self.sync_interval_ms}")
            + " SCHEDULES=1" * self.schedules
            + " LATENESS=1" * self.lateness
            + " RETENTION=1" * self.retention
            + " PUSH=1" * self.push
        )


PLAIN = Mode()


def replay_key() -> str:
    return f"py={platform.python_version()} pysyncobj={PYSYNCOBJ_VERSION}"


def run_seed(
    seed: int,
    nodes: int = 3,
    tail: int = 60,
    profile: Profile | None = None,
    canary: str | None = None,
    scenario: str | None = None,
    mode: Mode = PLAIN,
    keep: frozenset[int] | None = None,
) -> Result:
    """Run ``seed``; ``canary`` takes a fix away first (sim/canaries.py: for the canary
    tests, and only in a process that runs nothing else after); ``scenario`` runs a
    scripted scenario's steps (sim/scenarios/) instead of the seed's drawn faults, on its
    number of nodes; ``mode``: what the seed draws besides (:class:`Mode`); ``keep``: only
    these of the seed's drawn faults are made (``python -m sim shrink``)."""
    hashseed = hashseed_for(seed)
    if os.environ.get("PYTHONHASHSEED") != str(hashseed):
        raise RuntimeError(
            f"seed {seed} runs under PYTHONHASHSEED={hashseed} (found {os.environ.get('PYTHONHASHSEED')}): "
            "run it through `python -m sim`"
        )
    canaries.apply(canary)
    script = Script(SCENARIOS[scenario]) if scenario else None
    if profile is None:
        drawn = mode._asdict()  # its fields are Profile's, by name
        if script is None:
            profile = Profile(nodes=nodes, spares=2 * mode.membership, **drawn)
        else:  # a scenario scripts its own membership changes, and may need node services
            drawn.update(membership=False, spares_first=False)
            drawn["service"] = mode.service or script.scenario.service
            profile = Profile(script.scenario.nodes, script.scenario.spares, **drawn)
    base = fresh_dir(os.path.join(sim_root(), f"{os.getpid()}-{seed}"))
    world = World(seed, base, profile, trace_lines=max(400, tail), script=script, keep=keep)
    result = Result(
        seed,
        hashseed,
        profile.nodes,
        ok=False,
        canary=canary,
        scenario=scenario,
        faults=world.faults,
        knobs=world.knobs,
    )
    handler = _TraceLog(world)
    root = logging.getLogger()
    saved_level, saved_handlers = root.level, root.handlers[:]
    root.handlers = [handler]
    root.setLevel(logging.WARNING)
    saved_random, saved_start = pysyncobj.syncobj.random, DumpWriter.start

    def dump_start(writer: DumpWriter, *args) -> None:
        saved_start(writer, *args)
        world.dump_written(writer.sim_node)

    DumpWriter.start = dump_start
    pysyncobj.syncobj.random = world.rng  # pysyncobj's election timeouts: the world's draws
    started = time.perf_counter()
    try:
        with patched(world.clock):
            try:
                world.run()
                result.ok = True
            except Violation as v:
                result.invariant, result.detail = v.invariant, v.detail
            except Exception as e:  # noqa: BLE001 - a crash of the product or the simulator
                result.invariant = "exception"
                result.detail = "".join(traceback.format_exception(e))[-3000:]
            finally:
                world.note(f"end: {result.invariant or 'ok'}")
    finally:
        pysyncobj.syncobj.random, DumpWriter.start = saved_random, saved_start
        world.disk.uninstall()
        root.handlers, root.level = saved_handlers, saved_level
        for node in world.nodes:
            if node.alive:
                node.crash()
        # A crashed node's loop holds tasks that never ran to their end: collected, their
        # coroutines would run their cleanup on a loop long gone. The process ends first.
        BURIED.extend(world.graveyard)
        fresh_dir(base)
        os.rmdir(base)
    result.wall_s = time.perf_counter() - started
    result.trace_hash = world.hasher.hexdigest()
    result.steps = world.steps
    result.virtual_s = world.clock.ns / S
    result.answers = dict(sorted(world.client.answered.items()))
    if world.workload is not None:
        result.answers = world.workload.answers()
    result.counts = dict(sorted(world.counts.items()))
    result.acked = len(world.acked)
    result.delivered = getattr(world, "delivered", 0)
    result.messages = world.network.messages
    result.trace_tail = list(world.trace)[-tail:] if tail else []
    return result


if __name__ == "__main__":  # pragma: no cover - a quick look: python -m sim.run SEED
    print(run_seed(int(sys.argv[1])).line())
