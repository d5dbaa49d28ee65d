"""The simulated world: nodes, their loops, a client, faults and checks, on virtual time.

One process, one thread. An event heap of ``(time, seq, event)``; each event is one
*step* of one actor:

* ``raft nX``: node X's tick (``RaftNode.doTick(0)``), or a message, a connect or a
  disconnect arriving at it (pysyncobj handles those on its tick thread too);
* ``loop nX``: one callback the tick posted through the crossing, or a client request
  reaching X (the node's event loop);
* ``client``: the client's next action; ``fault``: a fault starting or ending.

Every random choice (delays, tick jitter, the client's work, the fault plan, pysyncobj's
election timeouts) is drawn from the world's one ``random.Random(seed)``, in step order.
Events at the same instant run in ``seq`` order; tick times are jittered so that
interleavings differ by seed. The trace (one line per step) is hashed as it grows.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import heapq
import logging
import math
import os
import random
import shutil
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
from pysyncobj import FAIL_REASON

from horologe.cluster import PRODUCE, SYNC, ClusterSettings, Entry, Peer, StateMachine
from horologe.cluster.consumer_groups import dlq_topic
from horologe.cluster.raft.dial_node import DialNode
from horologe.cluster.raft.dump_file import read_local
from horologe.cluster.raft.journal import DiskJournal
from horologe.cluster.raft.node import RaftNode
from horologe.node.consumers.wire import message_fields
from horologe.node.service import NodeService
from horologe.storage import (
    CorruptLogError,
    MessageColumns,
    MessageId,
    Storage,
    StorageConfig,
    check_store,
    id_strings,
)
from horologe.storage.delay_index import MS_PER_HOUR
from horologe.storage.late_policies import DEAD_LETTERED
from horologe.wheel import Watermark

from . import push, service
from .clock import MONOTONIC_START_S, WALL_START_MS, Drift, VirtualClock
from .disk import ProcessExit, SyncedDisk
from .loop import SimLoop
from .membership import MembershipChanges
from .network import DROP, OPEN, REJECT, SimNetwork, transport_for
from .scripted import Script
from .service import RETRY_LEVELS_MS
from .workload import FRESH_S, GROUP, LATE_NAMES, Workload

log = logging.getLogger(__name__)

MS = 1_000_000  # ns
S = 1_000_000_000

# A small store layout (the default's 32 MiB of key-index heads per node costs more than a
# whole run); the same for every incarnation of a node, as a layout must be.
STORAGE = StorageConfig(key_buckets=1 << 10, key_segment_entries=1 << 12, ready_segment_entries=1 << 10)
TOPICS = ("a", "b")
# What a seed's faults are drawn from (crash twice as likely); POWER_FAULTS only with
# Profile.power_loss, so that without it every seed draws as it always did: they need the
# disk that knows what was fsynced (sim/disk.py).
FAULTS = ("crash", "crash", "crash_at_dump", "isolate", "one_way", "split", "reset", "slow", "skew")
POWER_FAULTS = ("power", "power_all", "fsync_fails")
# A shipment in several messages that take longer than a tick to arrive (with the links'
# bandwidth, sim/network.py), as a real store's does: the stores here hold a few tens of
# KB, which at 512 KiB a message went in one, installed before the follower's next tick.
SHIP_CHUNK_BYTES = 4096


class Violation(Exception):
    """An invariant failed: its name, and what was seen."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail


@dataclass
class Profile:
    """How long a run lasts and what it draws from (virtual seconds)."""

    nodes: int = 3
    spares: int = 0  # nodes made to join later (a scripted scenario adds them: change_membership)
    faults_s: float = 6.0  # faults start in [1, faults_s); all heal at faults_s
    max_faults: int = 5
    liveness_s: float = 12.0  # after the heal: a leader and a new commit within this
    restart_all: bool = True  # at the end, crash and restart every node, then check again
    power_loss: bool = False  # draw power losses too (sim/disk.py): off, seeds draw as before
    service: bool = False  # every node a NodeService, with producers and consumers (sim/service.py)
    membership: bool = False  # draw changes of the membership too (sim/membership.py; 2 spares)
    # The spares' addresses sort before the members' rather than after. Of two nodes the one
    # with the larger address dials (pysyncobj), so a spare then waits for the members' calls.
    spares_first: bool = False
    # A leader sends its new commit index at once after each apply, as pysyncobj does
    # (ClusterSettings.commit_told_within_s = 0), not with its next append.
    commit_at_once: bool = False
    # A power loss may keep what was not synced sector by sector, in no order (sim/disk.py).
    out_of_order: bool = False
    # Each node's next tick comes when its tick thread's wait would end (RaftNode._tick_wait:
    # its next timed step, tick_s while work goes on, at most idle_tick_s), or once a message
    # arrives for it, as the product's poll returns; not every tick_s on a grid.
    timed_waits: bool = False
    # The workload's calls take the routes' master check, which holds a request a moment
    # while the master may not serve (node/master_hold.py), rather than refusing it at once.
    hold: bool = False
    # The node services' sync_interval_ms, the longest gap between a master's S entries
    # when nothing falls due; None: the node's default.
    sync_interval_ms: int | None = None
    # The workload creates a recurring schedule that fires every second, pauses and resumes
    # it, and the consumers pull its firings too; the nodes plan them 1 s ahead, looking
    # every 100 ms (sim/workload.py, "Scheduler").
    schedules: bool = False
    # A third of the producer's messages carry a lateness policy (max_lateness 0-1,500 ms,
    # then drop or dead-letter), checked at the end (sim/workload.py, "Producer").
    lateness: bool = False
    # Retention cuts within a run: ready segments trimmed once passed, the first hour
    # removed (sim/service.py, RETENTION_CONFIG).
    retention: bool = False
    # A push subscription on a topic of its own, its pushes sent to a simulated receiver
    # (sim/push.py); once the run recovered, every owed message is taken or dead-lettered.
    push: bool = False


@dataclass
class Acked:
    index: int
    term: int
    digest: str
    messages: list[tuple[str, str, int]]  # (id, topic, deliver_at ms) of a produce
    at_ns: int
    # The memberships it may have been committed under: the committing leader's when it
    # applied it, and that one less a change still uncommitted in the leader's log (the
    # change may have been appended after the commit). A majority of one holds it.
    voters: tuple[tuple[str, ...], ...]


@dataclass
class _Event:
    fn: Callable
    args: tuple
    kind: str
    node: str | None
    label: str = ""


class SimCrossing:
    """The node's ``LoopCrossing``: a post becomes a step of the node's loop; the thread
    rule becomes an actor rule (the writer is used only in the node's own raft steps)."""

    def __init__(self, node: SimNode) -> None:
        self.node = node
        self.incarnation = node.incarnation

    def post(self, fn: Callable, *args) -> None:
        node = self.node
        if node.incarnation != self.incarnation:
            return
        if node.loop is not None:  # a service's asyncio loop: run in its next turn
            node.loop.call_soon(fn, *args)
            return
        node.posted.append((fn, args))
        world = node.world
        world.at(world.rng.randrange(0, 2 * MS), "loop", node.name, node.run_loop, self.incarnation)

    def require_off_loop(self, what: str) -> None:
        actor = self.node.world.actor
        if actor != ("raft", self.node.name):
            raise AssertionError(f"{what} outside {self.node.name}'s raft steps (in {actor})")


class SimNode:
    def __init__(self, world: World, name: str, address: str, members: dict[str, str], join: bool) -> None:
        """``members``: name -> address of the nodes it starts with (itself left out);
        ``join``: a spare, started to join (it votes once a change adds it)."""
        self.world = world
        self.name = name
        self.address = address
        self.data_dir = os.path.join(world.base_dir, self.name)
        peers = tuple(Peer(n, a, service.http_of(n)) for n, a in members.items() if n != self.name)
        self.settings = replace(
            ClusterSettings(self.name, self.address, self.data_dir, peers, insecure_dev=True, join=join),
            **world.knobs,
        )
        self.raft: RaftNode | None = None
        self.service: NodeService | None = None  # with Profile.service
        self.loop: SimLoop | None = None  # the service's event loop (sim/loop.py)
        self.turn_token = 0
        self.turn_at_ns: int | None = None  # the loop's next turn, scheduled
        self.incarnation = 0
        self.posted: deque = deque()
        self.tick_token = 0
        self.tick_at_ns = 0  # when the scheduled tick runs
        self.skew_ms = 0
        self.drift = Drift()  # its oscillator: monotonic and wall clock (sim/clock.py)
        self.wall_fix_ns = 0  # drift taken out of the wall clock (stepped back true at the heal)
        self.paused_until_ns = 0  # SIGSTOP: none of its steps run before this
        self.held: list = []  # the steps that came while it was stopped, in their order
        self.stop_token = 0
        self.crashes = 0
        self.crash_at_dump = False
        self.restart_check = False  # its first tick since it started is still to come
        self.write_errors_at_start = 0  # the disk's count of failed writes as it started
        self.starts_refused = 0  # starts that refused a file a step damaged (world.damaged)
        # What this node's Raft log held when it went down: (first index, terms)
        self.down_holds: tuple[int, list[int]] | None = None
        self.held_before: tuple[int, list[int]] | None = None  # down_holds as it last started
        self.synced = 0  # the last index its journal holds on disk (_watch_commits)
        self.stepped_back = False  # a fault stepped its clocks back: its process ends itself
        self.stepped_ahead_ms = 0  # the largest step ahead of its clocks so far, under FRESH_S

    @property
    def alive(self) -> bool:
        return self.raft is not None

    def wall_ms(self) -> int:
        clock = self.world.clock
        drift_ns = self.drift.local_ns(clock.ns) - clock.ns - self.wall_fix_ns
        return clock.wall_ms() + self.skew_ms + drift_ns // MS

    # -- start, crash ------------------------------------------------------------

    def configure_peers(self, members: dict[str, str]) -> None:
        """Its config names ``members`` (name -> address) as its peers, as an operator
        starts a node to join with the members of then (docs/deploy.md, "Membership"): a
        member added since the world was made may lead, and a spare whose address is
        the larger dials it."""
        peers = tuple(Peer(n, a, service.http_of(n)) for n, a in members.items() if n != self.name)
        self.settings = replace(self.settings, peers=peers)

    def start(self) -> None:
        clock = self.world.clock
        saved, clock.drift = clock.drift, self.drift  # a fault's step starts it: its own clock
        errors = self.write_errors_at_start = self.world.disk.write_errors
        try:
            self._start()
        except Exception as e:
            # A file a step damaged: the node refuses to start, as `horologe node` exits
            # with one line, and stays down (an operator replaces it). A start that a failed
            # write ended: the process exits with the error, and the next restart (the
            # fault's end, or the heal) tries again. Either way its files are closed.
            refused = isinstance(e, CorruptLogError) and self.name in self.world.damaged
            if not refused and self.world.disk.write_errors == errors:
                raise
            what = "refused to start" if refused else "start failed"
            self.world.note(f"{self.name} {what}: {self.world.described(e)}")
            self.starts_refused += refused
            # The process is gone: no service answers (a service kept here with no Raft
            # node answered the workload's calls with AttributeError, and a client that
            # took this node for master stayed with it instead of looking elsewhere).
            self.world.graveyard.append((None, self.service, self.loop))
            self.raft = self.service = self.loop = None
            _close_fds_under(self.data_dir)
        finally:
            clock.drift = saved

    def _start(self) -> None:
        world = self.world
        self.incarnation += 1
        self.posted.clear()
        self.stepped_back = False  # a new process: its watch starts from the clock as it is
        self.held_before = self.down_holds  # for check_restart, after the first tick
        name = self.name
        crossing = SimCrossing(self)
        if world.profile.service:
            storage = STORAGE
            if world.profile.retention:
                storage = replace(STORAGE, ready_segment_span_ms=service.READY_SEGMENT_SPAN_MS)
            self.service, self.loop = service.build(self, crossing, self.monotonic_went_back, storage)
            self.loop.set_exception_handler(world.loop_error)
            state = self.service._writer
        else:
            state = StateMachine(Storage(os.path.join(self.data_dir, "store"), STORAGE))
        for line in state.store.recovered:
            world.note(f"{name} store opened: {line}")
        if state.store.journal.lost_at is not None:
            world.count("writes lost out of order")
        real_apply = state.apply

        def apply(index: int, blob: bytes, term: int | None = None):
            world.observe_apply(name, index, term, blob)
            res = real_apply(index, blob, term)
            if world.workload is not None and res is not None and res.kind == PRODUCE:
                ids = world.workload.ids
                for mid in id_strings(res.id_hours, res.id_gis):
                    ids.setdefault(mid, (index, term))
            if world.workload is not None and world.profile.retention:
                world.workload.note_group(state.store)
            return res

        state.apply = apply
        if self.service is not None:
            service.start(self.service, self.loop)
            self.raft = self.service.raft
        else:
            self.raft = RaftNode(
                self.settings,
                state,
                crossing,
                lambda applied: None,
                lambda leads: world.note(f"{name} loop: role {'master' if leads else 'follower'}"),
                clock=self.wall_ms,
                auto_tick=False,
                on_monotonic_step=self.monotonic_went_back,
                transport_class=world.transport_class,
            )
        self.raft._dump.sim_node = name
        journal = self.raft._journal
        for method in ("deleteEntriesFrom", "deleteEntriesTo", "clear"):
            setattr(journal, method, _flagging(getattr(journal, method), world, f"{name} journal.{method}"))
        _watch_commits(self, journal)
        world.durability_dirty = True
        world.note(f"{name} started (incarnation {self.incarnation}), journal last {journal.last_idx}")
        self.restart_check = True  # after the first tick, which loads the dump
        self.down_holds = None
        self.schedule_tick(world.rng.randrange(0, int(self.settings.tick_s * S)))

    def monotonic_went_back(self, seconds: float) -> None:
        """The Raft shell saw its monotonic clock go back: after a fault's step back, it
        ends its process as in the product (``exit_for_step``, status 71), in the middle of
        its tick; the world takes the node down at the end of the step. Otherwise the
        virtual clock went back, which is the simulator's own bug."""
        if not self.stepped_back:
            raise AssertionError(f"the virtual monotonic clock of {self.name} went back {seconds} s")
        self.world.note(f"{self.name} monotonic clock went back {seconds:.3f} s: the process exits (71)")
        self.world.count("monotonic exits")
        self.world.exiting.append(self)
        raise ProcessExit(71)

    def crash(self) -> None:
        """SIGKILL: no more steps; every file of the process closed as the kernel would
        (nothing flushed, nothing synced: the page cache keeps what was written)."""
        raft = self.raft
        if raft is None:
            return
        world = self.world
        journal = raft._journal
        self.down_holds = (journal._idx[0] if len(journal) else 0, list(journal._terms))
        if self.paused_until_ns:  # a stopped process killed: its restart runs at once
            world.resume(self, self.stop_token)
        world.network.detach(self.address)
        raft.transport.destroy()
        _close_fds_under(self.data_dir)
        notifier = getattr(raft, "_SyncObj__pipeNotifier", None)
        if notifier is not None:
            for attr in ("_PipeNotifier__pipeR", "_PipeNotifier__pipeW"):
                _null_fd(getattr(notifier, attr))
        world.graveyard.append((raft, self.service, self.loop))  # never collected mid-run: no
        self.raft = self.service = self.loop = None  # finalizer runs on our files, no task ends
        self.turn_at_ns = None
        self.incarnation += 1
        self.posted.clear()
        self.crashes += 1
        world.note(f"{self.name} crashed")

    def lose_power(self) -> None:
        """A crash (if it runs), then the node's files hold what was fsynced (sim/disk.py).
        Whatever a running node applied was synced first (the durability rule,
        cluster/raft/journal.py), so its journal, or its dump, still reaches it
        (``applied-is-durable``)."""
        world = self.world
        applied = None if self.raft is None else self.raft.raftLastApplied
        self.crash()
        for line in world.disk.lose_power(self.data_dir, world.rng, world.profile.out_of_order):
            world.note(f"{self.name} power lost: {line}")
        raft_dir = os.path.join(self.data_dir, "raft")
        self.down_holds = durable_journal(os.path.join(raft_dir, "journal"), world.scratch())
        first, terms = self.down_holds
        last = first + len(terms) - 1
        if applied is not None and last < applied and os.path.exists(os.path.join(raft_dir, "snapshot")):
            dump = read_local(os.path.join(raft_dir, "snapshot"))
            last = max(last, applied if dump is None else dump.index)  # None: a shipped one, whole
        if applied is not None and last < applied and world.pending_violation is None:
            holds = f"up to {first + len(terms) - 1}" if terms else "no entry"
            world.pending_violation = Violation(
                "applied-is-durable",
                f"{self.name} applied up to {applied}; after a power loss its journal holds {holds}",
            )
        world.durability_dirty = True

    # -- steps ---------------------------------------------------------------------

    def schedule_tick(self, delay_ns: int) -> None:
        self.tick_token += 1
        self.tick_at_ns = self.world.clock.ns + max(0, delay_ns)
        self.world.at(delay_ns, "raft", self.name, self.tick, self.tick_token)

    def wake(self) -> None:
        """A message or a proposal arrived: pysyncobj's poll returns, the next tick starts.
        With timed waits, a tick due sooner stays (arrivals one after another would put it
        off for good otherwise)."""
        delay_ns = self.world.rng.randrange(0, 200_000)
        now = self.world.clock.ns
        if self.world.profile.timed_waits and now <= self.tick_at_ns <= now + delay_ns:
            return
        self.schedule_tick(delay_ns)

    def tick(self, token: int) -> bool:
        if token != self.tick_token or self.raft is None:
            return False
        raft = self.raft
        raft.doTick(0)
        if self.restart_check and self.raft is raft:
            self.restart_check = False
            self.world.check_restart(self)
        if self.world.profile.timed_waits and self.raft is raft:
            # As the tick thread's poll: its wait, plus a scheduler's wake-up delay.
            wait_ns = int(raft._tick_wait(self.settings.idle_tick_s) * S)
            self.schedule_tick(wait_ns + self.world.rng.randrange(0, 200_000))
            return True
        tick_ns = int(self.settings.tick_s * S)
        self.schedule_tick(tick_ns + self.world.rng.randrange(-tick_ns // 5, tick_ns // 5))
        return True

    def plan_turn(self) -> None:
        """After each of its steps: the service loop's next turn, when it has something to run
        (a callback ready: within 1 ms; else its first timer, by this node's clock)."""
        loop = self.loop
        when = loop.next_turn()
        if when is None:
            return
        world = self.world
        if loop._ready:
            if self.turn_at_ns is not None and self.turn_at_ns <= world.clock.ns + MS:
                return
            t = world.clock.ns + world.rng.randrange(0, MS)
        else:
            local = math.ceil((when - MONOTONIC_START_S) * S) + 1_000  # float rounding: never early
            t = self.drift.true_ns(local)
            if self.turn_at_ns is not None and self.turn_at_ns <= t:
                return
        self.turn_token += 1
        self.turn_at_ns = t
        world.at_abs(t, "loop", self.name, self.turn, self.turn_token)

    def turn(self, token: int) -> bool:
        """One turn of the service's loop; the tick runs soon after if it left Raft work."""
        if token != self.turn_token or self.loop is None:
            return False
        self.turn_at_ns = None
        self.loop.turn()
        if self.raft is not None and service.raft_has_work(self.raft):
            self.wake()
        return True

    def run_loop(self, incarnation: int) -> bool:
        if incarnation != self.incarnation or not self.posted:
            return False
        fn, args = self.posted.popleft()
        fn(*args)
        return True

    def summary(self) -> str:
        raft = self.raft
        if raft is None:
            return f"{self.name}:down"
        role = "L" if raft._isLeader() else "c" if raft.is_candidate() else "f"
        return (
            f"{self.name}:{role}{raft.current_term()} c{raft.raftCommitIndex}"
            f" a{raft.raftLastApplied} l{raft._journal.last_idx}"
        )


def durable_journal(path: str, scratch: str) -> tuple[int, list[int]]:
    """(first index, terms) of the Raft journal at ``path`` as a restart will read it."""
    if not os.path.exists(path):
        return 0, []  # a node that never started
    with open(path, "rb") as f:
        return journal_holds(f.read(), scratch)


def journal_holds(data: bytes, scratch: str) -> tuple[int, list[int]]:
    """(first index, terms) of a Raft journal whose file holds ``data``: a copy is opened
    in the empty folder ``scratch`` (the open sets a torn tail aside)."""
    copy = os.path.join(scratch, "journal")
    with open(copy, "wb") as f:
        f.write(data)
    journal = DiskJournal(copy)
    try:
        return (journal._idx[0] if len(journal) else 0), list(journal._terms)
    finally:
        journal._destroy()


def _flagging(method: Callable, world: World, label: str) -> Callable:
    def wrapper(*args):
        world.note(f"{label}{args}")
        world.durability_dirty = True
        return method(*args)

    return wrapper


def _watch_commits(node: SimNode, journal: DiskJournal) -> None:
    """Keeps ``node.synced``, the last index its journal holds on disk, for two invariants
    checked as they happen: ``leader-counts-its-disk``, a leader sets its commit index only
    over entries on its disk (pysyncobj counts the leader's own copy towards the majority,
    and the followers learn the commit from its next append and apply; a copy in the page
    cache could go with the power while a log without it wins the next election); and
    ``answer-from-its-disk`` (:meth:`World.check_answer`). Checked as the index is set,
    so that a sync later in the same tick does not hide it. At start, with power loss in
    the run, entries count as on disk only as far as the disk model holds them (a process
    that died between a write and its fsync left the rest in the page cache)."""
    world = node.world
    node.synced = _durable_last(world, journal)
    sync, cut, set_commit = journal.sync, journal.deleteEntriesFrom, journal.setRaftCommitIndex

    def syncing() -> bool:
        last = journal.last_idx
        done = sync()
        if done:  # else nothing was written since the last fsync: what is on disk stays
            node.synced = last
        return done

    def cutting(entry_from) -> None:
        cut(entry_from)
        node.synced = min(node.synced, journal.last_idx)

    def committing(index) -> None:
        raft = node.raft
        dead = world.disk.ended(node.data_dir)  # earlier in this step: a real process would be gone
        counts = raft is not None and raft._isLeader() and not dead
        if counts and index > node.synced and world.pending_violation is None:
            world.pending_violation = Violation(
                "leader-counts-its-disk",
                f"{node.name} set its commit index to {index} as leader; "
                f"its journal is synced up to {node.synced}",
            )
        set_commit(index)

    journal.sync, journal.deleteEntriesFrom, journal.setRaftCommitIndex = syncing, cutting, committing


def _durable_last(world: World, journal: DiskJournal) -> int:
    """The last index of ``journal`` that a power loss would leave (every index it holds,
    without power loss in the run)."""
    data = world.disk.durable(journal.path)
    if data is None or not len(journal):
        return journal.last_idx
    first, terms = journal_holds(data, world.scratch())
    return first + len(terms) - 1 if terms else journal._idx[0] - 1


_DEVNULL: int | None = None


def _null_fd(fd: int) -> None:
    """Close ``fd`` as a crash does, but keep its number taken (pointing at /dev/null), so
    that a dead object that closes it later cannot close a live file that reused it."""
    global _DEVNULL
    if _DEVNULL is None:
        _DEVNULL = os.open(os.devnull, os.O_RDWR)
    try:
        os.dup2(_DEVNULL, fd)
    except OSError:
        pass


def _close_fds_under(folder: str) -> None:
    prefix = os.path.realpath(folder) + os.sep
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith(prefix):
            _null_fd(int(name))


# -- the client ------------------------------------------------------------------------


@dataclass
class Client:
    """Proposes what a node's service would (``NodeService.submit``): an ``Entry`` stamped
    with the proposing node's clock and watermark, through ``RaftNode.apply_entry`` on the
    node's loop, on whichever node it believes leads; redirected by a node that does not."""

    believed: str
    sent: int = 0
    answered: dict[str, int] = field(default_factory=dict)
    final_index: int | None = None  # the liveness probe's entry, once committed
    paused: bool = False  # a scripted scenario's hold: no request while set


class World:
    def __init__(
        self,
        seed: int,
        base_dir: str,
        profile: Profile | None = None,
        trace_lines: int = 400,
        script: Script | None = None,
        keep: frozenset[int] | None = None,
    ) -> None:
        """``keep``: install only these of the seed's drawn faults (by their order drawn);
        the draws are made all the same, so the faults kept are the ones the seed has."""
        self.seed = seed
        self.rng = random.Random(seed)
        self.profile = profile or Profile()
        self.clock = VirtualClock()
        self.base_dir = base_dir
        self.heap: list = []
        self.seq = 0
        self.steps = 0
        self.actor: tuple[str, str | None] | None = None
        self.trace: deque[str] = deque(maxlen=trace_lines)
        self.hasher = hashlib.sha256()
        self.notes: list[str] = []
        self.graveyard: list = []
        self.knobs = self._draw_knobs()
        if self.profile.commit_at_once:
            self.knobs["commit_told_within_s"] = 0.0
        self.script = script  # a scripted scenario's steps instead of the drawn faults
        if script is not None:
            self.knobs.update(script.scenario.knobs)
        # Power losses need every fsync's bytes, from the start (sim/disk.py).
        self.disk = SyncedDisk()
        if self.profile.power_loss or (script is not None and script.scenario.power_loss):
            self.disk.install(base_dir)
        n, spares = self.profile.nodes, self.profile.spares
        names = [f"n{i + 1}" for i in range(n + spares)]
        addresses = [f"10.0.0.{i + 1}:7000" for i in range(n + spares)]
        if self.profile.spares_first:
            addresses = addresses[spares:] + addresses[:spares]
        self.by_address: dict[str, SimNode] = {}
        self.network = SimNetwork(self, addresses)
        if script is not None:
            self.network.bytes_per_s = script.scenario.bytes_per_s
        self.transport_class = transport_for(self.network)
        first = dict(zip(names[:n], addresses[:n], strict=True))
        # Every node made (the trace shows each); ``nodes`` are the members now, in the order
        # they became members: spares join them, removed nodes leave them (and stay down).
        self.all_nodes = [
            SimNode(self, a, b, first, join=k >= n)
            for k, (a, b) in enumerate(zip(names, addresses, strict=True))
        ]
        self.nodes = self.all_nodes[:n]
        self.by_name = {node.name: node for node in self.all_nodes}
        self.by_address = {node.address: node for node in self.all_nodes}
        self.by_actor = {**self.by_name, **self.by_address}  # an event's node: a name or an address
        self.client = Client(self.rng.choice(names[:n]))
        # checks
        self.applied: dict[int, tuple[int | None, str, str]] = {}  # index -> (term, digest, first node)
        self.leaders: dict[int, str] = {}  # term -> the node that led it
        self.votes: dict[tuple[str, int], str] = {}  # (voter, term) -> the candidate it voted for
        self.proposers: dict[str, set[str]] = {}  # the client's entries: digest -> the nodes it asked
        self.complete: set[int] = set()
        self.committed_under: dict[
            int, tuple[tuple[str, ...], ...]
        ] = {}  # index -> Acked.voters  # terms whose leader was found holding every acked entry
        self.acked: list[Acked] = []
        self.durability_dirty = False  # a log was cut or a node restarted: check every acked entry
        self.acks_checked = 0  # acked entries checked since (the later ones, once each)
        self.pending_violation: Violation | None = None
        self.exiting: list[SimNode] = []  # nodes whose process ended itself in this step
        self.phase = "faults"
        self.heal_ns: int | None = None
        self.faults: list[str] = []
        self.drawn = 0  # faults drawn so far (kept or not)
        self.keep = keep
        self.counts: dict[str, int] = {}
        self.topics = (*TOPICS, push.TOPIC) if self.profile.push else TOPICS  # the workload's
        self.workload = Workload(self, self.topics) if self.profile.service else None
        self.retired: set[str] = set()  # removed from the membership: never started again
        self.damaged: set[str] = set()  # nodes whose files a scenario's step damaged
        self.changes = MembershipChanges(self, seed) if self.profile.membership else None

    def _draw_knobs(self) -> dict:
        rng = self.rng
        return {
            "log_compaction_min_entries": rng.choice((30, 100, 400, 50_000)),
            "tick_s": rng.choice((0.005, 0.01)),
            "hold_back_s": 2.0,
            "ship_chunk_bytes": SHIP_CHUNK_BYTES,
        }

    # -- events ------------------------------------------------------------------------

    def at(self, delay_ns: int, kind: str, node: str | None, fn: Callable, *args) -> None:
        self.at_abs(self.clock.ns + max(0, delay_ns), kind, node, fn, *args)

    def at_abs(self, t_ns: int, kind: str, node: str | None, fn: Callable, *args) -> None:
        self.seq += 1
        node = self.by_address[node].name if node in self.by_address else node
        heapq.heappush(self.heap, (max(t_ns, self.clock.ns), self.seq, _Event(fn, args, kind, node)))

    def scratch(self) -> str:
        """An empty folder of this run's own (under ``base_dir``: its path is the same in
        every run once the trace writes ``base_dir`` as ``<base>``)."""
        path = os.path.join(self.base_dir, "scratch")
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path

    def note(self, line: str) -> None:
        self._trace(f"  . {line}")

    def _trace(self, line: str) -> None:
        self.trace.append(line)
        self.hasher.update(line.encode())
        self.hasher.update(b"\n")

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    def step(self) -> bool:
        """Run the next event that does something; False when none is left."""
        while self.heap:
            t, _, ev = heapq.heappop(self.heap)
            node = self.by_actor.get(ev.node)
            if node is not None and node.paused_until_ns > t and ev.kind in ("raft", "loop"):
                node.held.append(ev)  # stopped: its steps wait, in order (messages queue in its socket)
                continue
            self.clock.ns = t
            self.clock.drift = None if node is None or node.drift.off else node.drift
            self.actor = (ev.kind, ev.node)
            errors = self.disk.write_errors
            try:
                did = ev.fn(*ev.args)
            except ProcessExit:
                did = True  # the step ended with its node's process
            except Exception as e:
                if node is not None and self.disk.ended(node.data_dir):
                    # The process ended in this step, and something caught the exit (pysyncobj
                    # has bare excepts: loading a dump): what ran after it is not real.
                    did = True
                elif self.disk.write_errors == errors or node is None:
                    raise
                else:
                    did = self._survive(node, ev, e)
            if node is not None and node.loop is not None:
                node.plan_turn()
            self.actor = None
            self.clock.drift = None
            for gone in self.exiting:
                gone.crash()
            self.exiting.clear()
            self.exit_crashed_writes()
            self.exit_failed_fsyncs()
            if did is False:
                continue
            self.steps += 1
            name = getattr(ev.fn, "__name__", "?")
            summary = " ".join(node.summary() for node in self.all_nodes)
            self._trace(f"{self.steps} t={t / S:.6f} {ev.kind} {ev.node or '-'} {name} | {summary}")
            self.check_step()
            return True
        return False

    def described(self, e: Exception) -> str:
        """An error as the trace shows it: the run's folder (a path holds the pid) as <base>."""
        return f"{type(e).__name__}: {str(e).replace(self.base_dir, '<base>')[:200]}"

    def _survive(self, node: SimNode, ev: _Event, e: Exception) -> bool:
        """A step of ``node`` raised after a write failed in it: as in the product, where
        pysyncobj's tick thread logs what a tick raises and ticks again a period later, and
        the event loop logs what a callback raises and runs on. The node serves on."""
        self.note(f"{node.name} {ev.kind} step raised {self.described(e)}")
        self.count("write errors raised")
        if ev.fn == node.tick:
            node.schedule_tick(int(node.settings.tick_s * S))
        return True

    # -- the run -----------------------------------------------------------------------

    def run(self) -> None:
        prof = self.profile
        for node in self.nodes:
            node.start()
        if self.script is None:
            self.plan_faults()
            self.at(int(prof.faults_s * S), "fault", None, self.heal)
        else:
            self.script.start(self)  # its last step heals
        if self.workload is None:
            self.at(int(0.5 * S), "client", None, self.client_act)
        else:
            self.workload.start()
        while self.step():
            if self.phase == "done":
                return
        raise Violation("liveness", "the world ran out of events")

    def plan_faults(self) -> None:
        rng, prof = self.rng, self.profile
        names = [n.name for n in self.nodes]
        for _ in range(rng.randrange(0, prof.max_faults + 1)):
            start, length = self._span(rng)
            kind = rng.choice(FAULTS + POWER_FAULTS if prof.power_loss else FAULTS)
            a = rng.choice(names)
            if kind == "split":
                group = set(rng.sample(names, rng.randrange(1, len(names) // 2 + 1)))
                how = rng.choice((DROP, REJECT))
                pairs = [(x, y) for x in names for y in names if (x in group) != (y in group)]
                self._fault(start, length, f"split {sorted(group)} {how}", self._paths(pairs, how))
            elif kind == "isolate":
                how = rng.choice((DROP, REJECT))
                pairs = [(x, y) for x in names for y in names if x != y and a in (x, y)]
                self._fault(start, length, f"isolate {a} {how}", self._paths(pairs, how))
            elif kind == "one_way":
                b = rng.choice([x for x in names if x != a])
                self._fault(start, length, f"one-way {a}->{b} drop", self._paths([(a, b)], DROP))
            elif kind == "crash":
                self._fault(start, length, f"crash {a}", (self._crash(a), self.restart_of(a)))
            elif kind == "crash_at_dump":
                self._fault(start, length, f"crash {a} at its next dump", self._crash_at_dump(a))
            elif kind in ("power", "power_all"):
                who = names if kind == "power_all" else [a]
                self._fault(start, length, f"power loss {who}", self._power_loss(who))
            elif kind == "fsync_fails":
                after, err = rng.randrange(1, 40), rng.choice((errno.EIO, errno.ENOSPC))
                what = f"fsync {after} of {a} fails ({errno.errorcode[err]})"
                self._fault(start, length, what, self._fsync_fails(a, after, err))
            elif kind == "reset":
                b = rng.choice([x for x in names if x != a])
                self._fault(start, 0, f"reset {a}-{b}", (self._reset(a, b), lambda: None))
            elif kind == "slow":
                b = rng.choice([x for x in names if x != a])
                ms = rng.choice((20, 80, 250))
                self._fault(start, length, f"slow {a}->{b} +{ms} ms", self._slow(a, b, ms))
            else:
                ms = rng.choice((-3000, -500, 500, 3000, 3_600_000))
                self._fault(start, length, f"skew {a} {ms:+d} ms", self._skew(a, ms))
        self._plan_stops_and_drifts(names)
        if prof.power_loss:
            self._plan_write_faults(names)
        self._plan_clock_steps(names)
        if prof.service:
            self._plan_releases(names)
        changes = self.changes
        if changes is not None and changes.wanted:
            self._fault(changes.start_s, 0, changes.describe(), (changes.begin, lambda: None))

    def _span(self, rng: random.Random) -> tuple[float, float]:
        """A fault's start, within the faults' time, and its length (0.2-3 s, ending by then)."""
        start = rng.uniform(1.0, self.profile.faults_s - 0.5)
        return start, rng.uniform(0.2, min(3.0, self.profile.faults_s - start))

    def _plan_stops_and_drifts(self, names: list[str]) -> None:
        """Pauses (SIGSTOP) and clock drift, drawn from a stream of their own (``seed/stops``)
        after the faults above, so that adding them moved none of a seed's other draws (the
        regression seeds and their ``--keep`` lists held)."""
        rng = random.Random(f"{self.seed}/stops")
        for _ in range(rng.randrange(0, 3)):
            start, length = self._span(rng)
            a = rng.choice(names)
            if rng.random() < 0.6:
                self._fault(start, length, f"stop {a}", self.stop(a, length))
            else:
                rate = rng.choice((-0.2, -0.05, 0.05, 0.2))
                self._fault(start, length, f"drift {a} {rate:+.0%}", self._drift(a, rate))

    def _plan_write_faults(self, names: list[str]) -> None:
        """0-1 faults of a write (``--power-loss`` only), from a stream of their own
        (``seed/writes``), drawn last: every other draw of a seed, and the order of its
        faults (``--keep``), stay as they were. A node's k-th write from the fault's start
        fails with ENOSPC or EIO (and every later one until the fault ends), or its process
        dies in it, then maybe the power too; either way a prefix of that write's bytes
        reaches the page cache (sim/disk.py)."""
        rng = random.Random(f"{self.seed}/writes")
        if rng.random() < 0.5:
            return
        start, length = self._span(rng)
        a = rng.choice(names)
        after, kept = rng.randrange(1, 80), rng.random()
        how = rng.choice(("enospc", "eio", "crash", "power"))
        if how in ("enospc", "eio"):
            err = errno.ENOSPC if how == "enospc" else errno.EIO
            what = f"write {after} of {a} fails ({errno.errorcode[err]}, {kept:.0%} written)"
            self._fault(start, length, what, self._write_fails(a, after, err, kept))
        else:
            then = ", then power loss" if how == "power" else ""
            what = f"crash {a} in its write {after} ({kept:.0%} written{then})"
            self._fault(start, length, what, self._crash_at_write(a, after, kept, how == "power"))

    def _plan_clock_steps(self, names: list[str]) -> None:
        """0-1 steps of a node's clocks, as libfaketime makes them (docs/chaos.md): its wall
        clock and its monotonic clock together, from a stream of their own (``seed/steps``),
        drawn after the faults above so that none of their draws moved. A step forward stays
        (the heal steps the wall clock back to true); a step back ends the node's process
        at its next tick (cluster/raft/monotonic_watch.py), restarted when the fault ends."""
        rng = random.Random(f"{self.seed}/steps")
        if rng.random() < 0.6:
            return
        start, length = self._span(rng)
        a = rng.choice(names)
        ms = rng.choice((-3_600_000, -3_000, -200, 200, 500, 3_000, 3_600_000))
        self._fault(start, length, f"step {a}'s clocks {ms:+d} ms", self.clock_step(a, ms))

    def _plan_releases(self, names: list[str]) -> None:
        """0-2 forced releases of the master (``--service``), 1-4 in a row each, as an admin's
        ``POST /admin/release-master`` (sim/workload.py), from a stream of their own
        (``seed/releases``), drawn last."""
        rng = random.Random(f"{self.seed}/releases")
        for _ in range(rng.choice((0, 0, 1, 2))):
            start = rng.uniform(1.0, self.profile.faults_s - 0.5)
            times = rng.randrange(1, 5)
            begin = functools.partial(self.workload.release_act, times, rng.choice(names))
            self._fault(start, 0, f"release the master x{times}", (begin, lambda: None))

    def _fault(self, start: float, length: float, what: str, actions) -> None:
        begin, end = actions
        index, self.drawn = self.drawn, self.drawn + 1
        if self.keep is not None and index not in self.keep:
            return
        self.faults.append(f"#{index} {start:.3f}+{length:.3f} {what}")

        def on() -> None:
            self.note(f"fault on: {what}")
            begin()

        def off() -> None:
            if self.phase == "faults":
                self.note(f"fault off: {what}")
                end()

        self.at(int(start * S), "fault", None, on)
        self.at(int((start + length) * S), "fault", None, off)

    def _node_addr(self, name: str) -> str:
        return self.by_name[name].address

    def _paths(self, pairs, how):
        paths = [(self._node_addr(x), self._node_addr(y)) for x, y in pairs]

        def on() -> None:
            for p in paths:
                self.network.set_path(*p, how)

        def off() -> None:
            for p in paths:
                self.network.set_path(*p, OPEN)

        return on, off

    def _crash(self, name: str) -> Callable:
        return lambda: self.by_name[name].crash()

    def restart_of(self, name: str) -> Callable:
        def restart() -> None:
            node = self.by_name[name]
            if not node.alive and name not in self.retired:
                node.start()

        return restart

    def _power_loss(self, names: list[str]):
        def on() -> None:
            for name in names:
                self.by_name[name].lose_power()

        def off() -> None:
            for name in names:
                self.restart_of(name)()

        return on, off

    def _fsync_fails(self, name: str, after: int, err: int):
        """The node's ``after``-th fsync from now fails, and the node's process ends there,
        mid-step (storage/durable.py); it restarts when the fault ends."""
        node = self.by_name[name]

        def on() -> None:
            if node.alive:
                self.disk.fail_fsync(node.data_dir, after, err)

        def off() -> None:
            self.disk.disarm(node.data_dir)  # if it never came
            self.restart_of(name)()

        return on, off

    def _write_fails(self, name: str, after: int, err: int, kept: float):
        """The node's ``after``-th write from now fails, and every later one until the fault
        ends (a disk full, or failing); what the node does then is the product's (a process
        that ended on it restarts when the fault ends)."""
        node = self.by_name[name]

        def on() -> None:
            if node.alive:
                self.disk.fail_write(node.data_dir, after, err, kept)

        def off() -> None:
            self.disk.disarm(node.data_dir)
            self.restart_of(name)()

        return on, off

    def _crash_at_write(self, name: str, after: int, kept: float, power: bool):
        """The node's process dies in its ``after``-th write from now (``power``: the power
        goes too); it restarts when the fault ends."""
        node = self.by_name[name]

        def on() -> None:
            if node.alive:
                self.disk.crash_at_write(node.data_dir, after, kept, power)

        def off() -> None:
            self.disk.disarm(node.data_dir)  # if it never came
            self.restart_of(name)()

        return on, off

    def exit_crashed_writes(self) -> None:
        """Each node whose process died in a write in the last step goes down: a crash (its
        page cache kept, with that write's prefix), or a power loss."""
        for folder, path, power in self.disk.take_crashed():
            node = next(n for n in self.all_nodes if os.path.realpath(n.data_dir) == folder)
            self.note(f"{node.name} process ended writing {path}{' and lost power' if power else ''}")
            if not node.alive:  # in its start: what the start opened closes with it
                _close_fds_under(node.data_dir)
            node.lose_power() if power else node.crash()

    def exit_failed_fsyncs(self) -> None:
        """Each node whose process ended on a failed fsync in the last step goes down as a
        power loss leaves it: the write-back that failed may have dropped its pages."""
        for folder, path in self.disk.take_exited():
            node = next(n for n in self.all_nodes if os.path.realpath(n.data_dir) == folder)
            if node.alive:
                self.note(f"{node.name} fsync of {path} failed: the process exits")
                node.lose_power()

    def _crash_at_dump(self, name: str):
        """Armed, ``name`` crashes right after the step that puts its next Raft dump in place
        (before the next tick cuts its journal: #46 finding 1), and restarts 0.1-1 s later."""
        node = self.by_name[name]

        def on() -> None:
            node.crash_at_dump = True

        def off() -> None:
            node.crash_at_dump = False

        return on, off

    def dump_written(self, name: str) -> None:
        node = self.by_name[name]
        self.count("dumps")
        if node.crash_at_dump and self.phase == "faults":
            node.crash_at_dump = False
            self.note(f"{name} wrote a dump: crash before its next tick")
            self.at(0, "fault", None, node.crash)
            self.at(self.rng.randrange(100 * MS, 1000 * MS), "fault", None, self.restart_of(name))

    def _reset(self, a: str, b: str) -> Callable:
        def reset() -> None:
            self.network.break_conn(self.network.conn(self._node_addr(a), self._node_addr(b)), "reset")

        return reset

    def _slow(self, a: str, b: str, ms: int):
        path = (self._node_addr(a), self._node_addr(b))
        saved = self.network.delay[path]

        def on() -> None:
            self.network.delay[path] = (ms * MS, saved[1])

        def off() -> None:
            self.network.delay[path] = saved

        return on, off

    def _skew(self, name: str, ms: int):
        node = self.by_name[name]

        def on() -> None:
            node.skew_ms = ms

        def off() -> None:
            node.skew_ms = 0

        return on, off

    def stop(self, name: str, length: float):
        """SIGSTOP for ``length`` s, then SIGCONT: no tick, no loop step; what reaches it
        waits (sim/world.py ``step``)."""
        node = self.by_name[name]

        def on() -> None:  # a stop while stopped ends with the later of the two
            end = self.clock.ns + int(length * S)
            if end > node.paused_until_ns:
                node.paused_until_ns = end
                node.stop_token += 1
                # 1 ns early: the held steps go first, before any that come at the end itself
                self.at_abs(end - 1, "fault", None, self.resume, node, node.stop_token)

        return on, lambda: None

    def resume(self, node: SimNode, token: int) -> None:
        """SIGCONT (or SIGKILL): the steps held while it was stopped run, in the order they
        came (a dead process's find it gone, as for any step of one)."""
        if token != node.stop_token:
            return  # stopped again meanwhile, to a later end
        node.paused_until_ns = 0
        node.stop_token += 1
        held, node.held = node.held, []
        for ev in held:
            self.at(0, ev.kind, ev.node, ev.fn, *ev.args)

    def clock_step(self, name: str, ms: int):
        """A step of ``name``'s clocks by ``ms`` (a fault's, or a scripted scenario's): its
        (on, off) actions, off restarting it after a step back."""
        node = self.by_name[name]

        def on() -> None:
            node.drift.step(ms * MS)
            if 0 < ms < FRESH_S * 1000:  # a larger step leaves every reading stale: nothing early
                node.stepped_ahead_ms = max(node.stepped_ahead_ms, ms)
            if ms < 0 and node.alive:
                node.stepped_back = True

        return on, (self.restart_of(name) if ms < 0 else lambda: None)

    def _drift(self, name: str, rate: float):
        """The node's oscillator runs ``rate`` fast (or slow): its monotonic clock and its
        wall clock, from now until the fault ends (then at the true rate, still ahead or
        behind by what it drifted; the heal steps its wall clock back to true)."""
        node = self.by_name[name]

        def on() -> None:
            node.drift.set_rate(self.clock.ns, rate)

        def off() -> None:
            node.drift.set_rate(self.clock.ns, 0.0)

        return on, off

    def heal(self) -> None:
        """Every fault ends: paths open, delays back, clocks true, every node up."""
        self.phase = "heal"
        self.heal_ns = self.clock.ns
        self.note("heal: all faults end")
        for path in list(self.network.paths):
            if self.network.paths[path] != OPEN:
                self.network.set_path(*path, OPEN)
        for node in self.nodes:
            node.skew_ms = 0
            node.drift.set_rate(self.clock.ns, 0.0)
            node.wall_fix_ns = node.drift.ahead_ns
            if not node.alive:
                node.start()
        self.at(int(self.profile.liveness_s * S), "fault", None, self.liveness_deadline)
        self.client.final_index = None

    def liveness_deadline(self) -> None:
        if self.phase in ("heal", "restarted", "draining"):
            state = " ".join(n.summary() for n in self.nodes)
            raise Violation(
                "liveness",
                f"no leader with a new commit applied everywhere {self.profile.liveness_s} s after "
                f"the {self.phase}: {state}",
            )

    # -- membership ---------------------------------------------------------------------

    def change_membership(
        self,
        kind: str,
        name: str,
        leader: SimNode,
        retire: bool = True,
        answered: Callable[[tuple[str, str] | None], None] | None = None,
        applied: tuple[int, int] | None = None,
    ) -> None:
        """Ask ``leader`` to add the spare ``name`` (started now, to join) or to remove the
        member ``name``, as ``horologe cluster add/remove`` does. Once the change is made,
        ``nodes`` follows it; a removed node is crashed for good (unless not ``retire``).
        ``answered(why)`` then runs with the master's answer (None: made). ``applied``:
        the (index, term) the spare applied up to, as its ``/readyz`` says (a restored one)."""
        node = self.by_name[name]
        if kind == "add" and not node.alive:
            if node.incarnation == 0:  # started now for the first time: with the members of now
                node.configure_peers({n.name: n.address for n in self.nodes})
            node.start()

        def settle(why) -> None:  # on the leader's loop, once made (None) or not
            if why is not None:
                self.note(f"membership: {kind} {name} not made: {why}")
                self.count(f"membership {why[0]}")
            else:
                self.note(f"membership: {kind} {name} made")
                self.count(f"membership {kind} made")
                if kind == "add":
                    self.nodes.append(node)
                else:
                    self.nodes.remove(node)
                    if retire:
                        self.retired.add(name)
                        node.crash()
            if answered is not None:
                answered(why)

        target = DialNode(node.address, None, name, service.http_of(name))
        leader.raft.change_membership(kind, target, 10.0, settle, applied)
        leader.wake()

    # -- the client ---------------------------------------------------------------------

    def client_act(self) -> None:
        if self.phase in ("draining", "done"):
            return
        client = self.client
        if client.paused:
            self.at(10 * MS, "client", None, self.client_act)
            return
        rng = self.rng
        target = self.by_name[client.believed]
        final = self.phase in ("heal", "restarted")
        kind = SYNC if final or rng.random() < 0.3 else PRODUCE
        client.sent += 1
        self.at(
            rng.randrange(100_000, 1 * MS),
            "loop",
            target.name,
            self.request,
            target,
            target.incarnation,
            kind,
            client.sent,
        )
        self.at(rng.randrange(2 * MS, 40 * MS), "client", None, self.client_act)

    def request(self, node: SimNode, incarnation: int, kind, serial: int | None = None) -> bool:
        """On ``node``'s loop: what the service does for a produce (or the wheel for a sync).
        ``serial`` names the client's request (its bodies and keys): the one it was sent as,
        which a stopped node may take up after later ones were sent (None: the last sent)."""
        if node.incarnation != incarnation or node.raft is None:
            self.client.believed = self.rng.choice([n.name for n in self.nodes])
            self._answer("lost")
            return True
        raft = node.raft
        if not raft.status.is_master:
            leader = self.by_address.get(raft.status.leader) if raft.status.leader else None
            self.client.believed = (leader or self.rng.choice(self.nodes)).name
            self._answer("redirect")
            return True
        now = node.wall_ms()
        if kind == PRODUCE:
            n = self.rng.randrange(1, 4)
            serial = self.client.sent if serial is None else serial
            topics = [self.rng.choice(TOPICS) for _ in range(n)]
            deliver = (topics, [now + self.rng.randrange(-500, 4000) for _ in range(n)])
            messages = MessageColumns(
                topics,
                [f"m{serial}.{i}".encode() for i in range(n)],
                np.array(deliver[1], dtype=np.int64),
                np.full(n, now, dtype=np.int64),
                [f"k{serial}.{i}" if self.rng.random() < 0.5 else None for i in range(n)],
            )
            entry = Entry(PRODUCE, Watermark(now - 200), now, messages=messages)
        else:
            deliver = ([], [])
            entry = Entry(SYNC, Watermark(now), now)
        blob = entry.encode()
        digest = _digest(blob)
        self.proposers.setdefault(digest, set()).add(node.name)
        crossing = raft._crossing

        def settle(res, err) -> None:  # on the node's loop
            self.on_answer(node.name, blob, digest, deliver, res, err)

        def done(res, err) -> None:  # on the raft steps, or at once when refused
            crossing.post(settle, res, err)

        raft.apply_entry(blob, callback=done)
        node.wake()
        return True

    def _answer(self, outcome: str) -> None:
        self.client.answered[outcome] = self.client.answered.get(outcome, 0) + 1

    def on_answer(self, name: str, blob: bytes, digest: str, deliver: tuple, res, err) -> None:
        if err != FAIL_REASON.SUCCESS:
            self._answer(f"failed:{err}")
            return
        self._answer("ok")
        index = res.raft_index
        held = self.applied.get(index)
        if held is None or held[1] != digest:
            raise Violation(
                "acked-is-committed",
                f"{name} answered success for entry {index} ({digest}), but index {index} applied {held}",
            )
        ids = [str(i) for i in res.ids] if res.kind == PRODUCE else []
        messages = list(zip(ids, *deliver, strict=True)) if ids else []
        voters = self.committed_under.get(index) or (self.membership_of(self.by_name[name]),)
        self.acked.append(Acked(index, held[0], digest, messages, self.clock.ns, voters))
        self.note(f"client: {name} acked entry {index} term {held[0]} ({len(ids)} messages)")
        if self.phase in ("heal", "restarted") and res.kind == SYNC:
            self.client.final_index = index

    # -- checks --------------------------------------------------------------------------

    def acked_messages(self, messages: list[tuple[str, tuple[int, int | None], str, int]]) -> None:
        """A produce answered through a node service: ``(id, (index, term) of the entry
        that applied it, topic, deliver_at)`` each; acknowledged entries from now on."""
        by_entry: dict[tuple[int, int | None], list] = {}
        for mid, entry, topic, at in messages:
            by_entry.setdefault(entry, []).append((mid, topic, at))
        for (index, term), msgs in sorted(by_entry.items()):
            voters = self.committed_under.get(index) or (tuple(sorted(n.name for n in self.nodes)),)
            self.acked.append(Acked(index, term, self.applied[index][1], msgs, self.clock.ns, voters))
            self.note(f"client: acked entry {index} term {term} ({len(msgs)} messages)")
            if self.phase in ("heal", "restarted"):
                self.client.final_index = max(index, self.client.final_index or 0)

    def violate(self, invariant: str, detail: str) -> None:
        """An invariant failed inside a node's step (on its loop): raised after the step."""
        if self.pending_violation is None:
            self.pending_violation = Violation(invariant, detail)

    def loop_error(self, loop, context: dict) -> None:
        """A service loop's callback or task raised where nothing awaited it: a bug."""
        exc = context.get("exception")
        where = context.get("future") or context.get("handle")
        self.violate("loop-error", f"{context.get('message')}: {exc!r} in {where!r}"[:600])

    def membership_of(self, node: SimNode) -> tuple[str, ...]:
        """The voters ``node`` counts now: itself and the members of its log."""
        return tuple(sorted((node.name, *(self.by_address[n.address].name for n in node.raft.otherNodes))))

    def observe_apply(self, name: str, index: int, term: int | None, blob: bytes) -> None:
        node = self.by_name[name]
        if node.raft is not None and node.raft._isLeader() and index not in self.committed_under:
            now = self.membership_of(node)
            raft = node.raft
            before = now
            for command, _i, _t in raft._get_entries(raft.raftCommitIndex + 1):
                change = raft.membership_change_of(command)
                if change is not None:
                    who = self.by_address[change[1]].name
                    before = tuple(sorted(set(now) - {who} if change[0] == "add" else {*now, who}))
            self.committed_under[index] = (now, before)
        digest = _digest(blob)
        held = self.applied.get(index)
        if held is None:
            self.applied[index] = (term, digest, name)
            self.check_proposer(index, term, digest)
        elif (held[0], held[1]) != (term, digest) and self.pending_violation is None:
            self.pending_violation = Violation(
                "same-index-same-entry",
                f"{name} applied entry {index} as term {term} {digest}; {held[2]} applied term {held[0]} "
                f"{held[1]}",
            )

    def check_proposer(self, index: int, term: int | None, digest: str) -> None:
        """Only the master proposes (docs/cluster.md): an entry of the client's is committed
        in a term whose leader it asked, never handed on by a node that no longer led."""
        asked = self.proposers.get(digest)
        leader = self.leaders.get(term)
        if asked is None or leader is None or leader in asked:
            return
        if self.pending_violation is None:
            self.pending_violation = Violation(
                "proposed-by-its-leader",
                f"entry {index} of term {term} (led by {leader}) was proposed on {sorted(asked)} only",
            )

    def check_answer(self, raft: RaftNode, address: str, message: dict) -> None:
        """``answer-from-its-disk``: a follower tells its leader it holds entries (a
        successful ``next_node_idx``) only once they are on its disk; the leader counts
        the answer towards a commit. An answer after a snapshot's install names the
        snapshot's entries (its journal is empty then), which the install synced."""
        node = self.by_address[address]
        if self.disk.ended(node.data_dir):
            return  # its process died earlier in this step: a real one would send nothing
        journal = raft._journal
        reported = message["next_node_idx"] - 1
        unsynced = journal._dirty or (len(journal) and reported > node.synced)
        if unsynced and self.pending_violation is None:
            self.pending_violation = Violation(
                "answer-from-its-disk",
                f"{node.name} answered next index {message['next_node_idx']} with entries its journal "
                f"had not synced (on disk up to {node.synced})",
            )

    def check_vote(self, voter: str, candidate: str, term: int) -> None:
        """``one-vote-per-term``: a node grants its vote in a term to one candidate, whatever
        restarts or power losses come between (Raft's ``votedFor`` is durable: two votes in
        one term can make two leaders of it). pysyncobj sends ``response_vote`` only to
        grant one."""
        node = self.by_address[voter]
        if self.disk.ended(node.data_dir):
            return  # its process died earlier in this step: a real one would send nothing
        first = self.votes.setdefault((voter, term), candidate)
        if first != candidate and self.pending_violation is None:
            self.pending_violation = Violation(
                "one-vote-per-term",
                f"{node.name} voted in term {term} for {self.by_address[first].name}, "
                f"then for {self.by_address[candidate].name}",
            )

    def check_step(self) -> None:
        if self.pending_violation is not None:
            raise self.pending_violation
        if self.workload is not None:
            self.workload.track_clocks()
        for node in self.all_nodes:  # a removed node or a spare leading counts too
            raft = node.raft
            if raft is not None and raft._isLeader():
                term = raft.current_term()
                first = self.leaders.setdefault(term, node.name)
                if first != node.name:
                    raise Violation("one-leader-per-term", f"{first} and {node.name} both led term {term}")
                if term not in self.complete:
                    self.complete.add(term)
                    self.check_leader_complete(node, term)
        if self.durability_dirty:
            self.durability_dirty = False
            self.check_durable()
        elif self.acks_checked < len(self.acked):
            self.check_durable(self.acked[self.acks_checked :])
        self.acks_checked = len(self.acked)
        if self.phase in ("heal", "restarted", "draining"):
            self.check_recovered()
        elif self.script is not None:
            self.script.advance(self)

    def holds(self, node: SimNode, index: int, term: int) -> bool:
        """Whether ``node``'s Raft log holds entry ``index`` of ``term``: in its journal, or
        before the journal's first entry (compacted into its snapshot). A down node is
        judged by what its disk held when it went down."""
        if node.raft is None:
            first, terms = node.down_holds
        else:
            journal = node.raft._journal
            first, terms = (journal._idx[0] if len(journal) else 0), journal._terms
        k = index - first
        return k < 0 or (k < len(terms) and terms[k] == term)

    def check_restart(self, node: SimNode) -> None:
        """After a node's first tick, which loads its dump: it is not halted, unless a write
        failed since it started (a disk full, or failing: the product halts a replica it
        cannot stage a restore for); and it keeps every committed entry its log held when
        it went down (after a power loss: what its disk held, sim/disk.py)."""
        halted = node.raft.state.halted
        if halted and self.disk.write_errors == node.write_errors_at_start:
            raise Violation("no-halt", f"{node.name} halted at restart: {halted}")
        first, terms = node.held_before or (0, [])
        for k, term in enumerate(terms):
            index = first + k
            committed = self.applied.get(index)
            if committed is None or committed[0] != term:
                continue  # not known committed: a restart may legally not need it
            if not self.holds(node, index, term):
                raise Violation(
                    "restart-keeps-committed",
                    f"{node.name} held committed entry {index} (term {term}) when it went down, "
                    f"and not after its restart (journal now starts at {node.raft._journal._idx[0]})",
                )

    def check_leader_complete(self, node: SimNode, term: int) -> None:
        """A new leader holds every entry acknowledged before it was elected (Raft's Leader
        Completeness: whatever the membership, one of the majority that committed an entry
        voted for it)."""
        for acked in self.acked:
            if not self.holds(node, acked.index, acked.term):
                raise Violation(
                    "leader-completeness",
                    f"{node.name} leads term {term} without entry {acked.index} (term {acked.term}), "
                    f"acked at t={acked.at_ns / S:.3f}",
                )

    def check_durable(self, acks: list[Acked] | None = None) -> None:
        """Every entry acknowledged to the client (or of ``acks``) is held by a majority of
        the membership it was committed under (in their Raft logs, or applied in their
        stores), whatever crashed or restarted since."""
        held = {n.name for n in self.all_nodes if n.down_holds or n.raft}
        for acked in self.acked if acks is None else acks:
            holders = [n for n in held if self.holds(self.by_name[n], acked.index, acked.term)]
            if not any(len(set(holders) & set(v)) > len(v) // 2 for v in acked.voters):
                raise Violation(
                    "acked-on-a-majority",
                    f"entry {acked.index} (term {acked.term}), acked at t={acked.at_ns / S:.3f}, is held "
                    f"only by {holders}",
                )

    def check_recovered(self) -> None:
        """After the heal: one leader all agree on, the client's new entry committed and
        applied on every node; then (once) a crash and restart of all, and again; then the
        client stops and, once every node applied the same entries, the end checks."""
        if self.phase == "draining":
            applied = {n.raft.raftLastApplied for n in self.nodes if n.raft is not None}
            commits = {n.raft.raftCommitIndex for n in self.nodes if n.raft is not None}
            if len(applied) == 1 and applied == commits and not any(n.posted for n in self.nodes):
                self.phase = "done"
                self.check_end()
            return
        if self.changes is not None and not self.changes.settled():
            return
        final = self.client.final_index
        if final is None:
            return
        leaders = [n for n in self.nodes if n.raft is not None and n.raft._isLeader()]
        if len(leaders) != 1:
            return
        address = leaders[0].address
        if not all(n.raft is not None and n.raft.leader_address() == address for n in self.nodes):
            return
        if not all(n.raft.raftLastApplied >= final for n in self.nodes):
            return
        self.note(f"recovered after the {self.phase}: leader {leaders[0].name}, entry {final} applied on all")
        if self.phase == "heal" and self.profile.restart_all:
            self.phase = "restarted"
            self.client.final_index = None
            for node in self.nodes:
                node.crash()
            for node in self.nodes:
                node.start()
            self.at(int(self.profile.liveness_s * S), "fault", None, self.liveness_deadline)
            return
        if self.workload is not None and self.workload.pushes is not None:
            self.phase = "pushing"  # the workload stops; the push worker goes on
            self.at(int(push.settle_s(RETRY_LEVELS_MS) * S), "fault", None, self.push_deadline)
            self.at(100 * MS, "client", None, self.push_wait)
            return
        self.phase = "draining"

    def push_wait(self) -> None:
        """``--push``, once the run recovered: draining once every owed message of the push
        topic was taken or dead-lettered (sim/push.py); looked at every 100 ms."""
        if self.phase != "pushing":
            return
        if self.workload.pushes.unsettled(self.least_watermark_ms(self.nodes)):
            self.at(100 * MS, "client", None, self.push_wait)
            return
        self.note("pushing: every owed message taken or dead-lettered")
        self.phase = "draining"

    def push_deadline(self) -> None:
        if self.phase != "pushing":
            return
        pushes = self.workload.pushes
        left = pushes.unsettled(self.least_watermark_ms(self.nodes))
        seen = "; ".join(
            f"{mid}: " + (", ".join(f"{t.answer} at {t.at_ms}/{t.attempt}" for t in taken) or "none")
            for mid, taken in ((m, pushes.taken.get(m, ())) for m in left[:5])
        )
        raise Violation(
            "push-liveness",
            f"{len(left)} owed messages of {push.TOPIC!r} neither taken nor dead-lettered "
            f"{push.settle_s(RETRY_LEVELS_MS)} s after the run recovered; their pushes: {seen}",
        )

    @staticmethod
    def least_watermark_ms(nodes) -> int:
        """The least watermark (ms) the given running nodes applied; 0 if none has one."""
        marks = [w for w in (n.raft.state.store.meta("ws") for n in nodes) if w is not None]
        return min((Watermark.from_wire(w).ms for w in marks), default=0)

    def check_end(self) -> None:
        """Every node at the same applied index: ready logs identical, no duplicate, none
        early by the master's clock, every acknowledged message due by then in the ready
        logs (the chaos suite's checker), stores sound, no node halted."""
        from chaos_tests.checker import check

        self.check_durable()
        for node in self.nodes:
            if node.raft.state.halted:
                raise Violation("no-halt", f"{node.name} halted: {node.raft.state.halted}")
        ws_ms = self.least_watermark_ms(self.nodes)
        errors = {}
        for node in self.nodes:
            try:
                check_store(node.raft.state.store)
                errors[node.name] = None
            except Exception as e:  # noqa: BLE001 - reported as the violation
                errors[node.name] = repr(e)
        self.delivered = 0
        edits = self.workload
        lateness = edits is not None and self.profile.lateness
        dead: set[str] = set()  # dead-lettered as late, of every topic
        retention = edits is not None and self.profile.retention
        for topic in self.topics:
            store = self.nodes[0].raft.state.store
            ready = {node.name: node.raft.state.store.read_ready(topic) for node in self.nodes}
            rows = ready[self.nodes[0].name]
            own, ids = _row_ids(store, rows)
            answers_to = {p: o for p, o in zip(own, ids, strict=True) if p != o}
            owed = edits.owed(topic, ws_ms) if edits is not None else None
            late = (
                {n.name: edits.late_outcomes(n.raft.state.store, topic) for n in self.nodes}
                if lateness
                else {}
            )
            first, removed = late.get(self.nodes[0].name, ({}, set()))
            if any(outcomes != (first, removed) for outcomes in late.values()):
                raise Violation(
                    "late-policy", f"topic {topic}: what was dropped or dead-lettered differs between nodes"
                )
            dead.update(mid for mid, (kind, _) in first.items() if kind == DEAD_LETTERED)
            # With --retention: one handed out and no longer in the ready log was trimmed
            # once the group passed it, one delivered before the group had progress on the
            # topic may have been trimmed unseen, and one with a policy whose hour is gone
            # may have been dropped or dead-lettered.
            gone = set()
            if retention:
                unseen = {mid for mid in owed if edits.trimmed_unseen(topic, min(edits.produced[mid].times))}
                gone = (edits.handed_out() - set(ids)) | removed | unseen
            produced = [
                {"id": mid, "key": mid, "deliver_at": at, "sent_ms": 0, "acked_ms": 0}
                for a in self.acked
                for mid, t, at in a.messages
                if t == topic
                and at < ws_ms
                and (owed is None or mid in owed)
                and mid not in first
                and mid not in gone
            ]
            history = {
                "produced": produced,
                "produce_failures": [],
                "cancels": [{"id": mid, "outcome": "ok"} for mid in edits.cancelled()] if edits else [],
                "consumed": [],
                "acks": [],
                "faults": [],
            }
            result = check(history, ready, errors, answers_to=answers_to)
            problems = [] if result["ready_logs_identical"] else ["ready logs differ between nodes"]
            for key in ("not_in_ready_log", "duplicates", "early", "cancelled_but_delivered"):
                if result[key]:
                    problems.append(f"{key} = {result[key]}")
            if edits is not None:
                fired = zip(ids, rows["deliver_at_ms"].tolist(), strict=True)
                at_old = [
                    mid for mid, at in fired if mid in edits.produced and at not in edits.produced[mid].times
                ]
                if at_old:
                    problems.append(f"fired at a time it was moved from = {at_old[:10]}")
            problems += [
                f"{n} store: {v['store_check']}" for n, v in result["nodes"].items() if v["store_check"]
            ]
            if problems:
                raise Violation("ready-logs", f"topic {topic}: {'; '.join(problems)}")
            self.delivered += len(ready[self.nodes[0].name])
            if retention:
                self.count("ready entries trimmed", store.ready_base(topic))
            if lateness:
                fired = zip(
                    ids, rows["deliver_at_ms"].tolist(), rows["delivered_at_ms"].tolist(), strict=True
                )
                problems = edits.lateness_problems(first, list(fired))
                if problems:
                    raise Violation("late-policy", f"topic {topic}: {'; '.join(problems[:10])}")
                for kind, what in LATE_NAMES.items():
                    self.count(f"late messages {what}", sum(k == kind for k, _ in first.values()))
        if lateness:
            self.check_dead_letters(dead)
        if edits is not None and (problems := edits.retry_id_problems()):
            raise Violation("retry-id", "; ".join(problems[:10]))
        if edits is not None and edits.pushes is not None and not retention:
            self.check_push_dead_letters(edits.pushes.last_level)
        if retention:
            first_hour = WALL_START_MS // MS_PER_HOUR
            self.counts["hours removed"] = max(
                0, self.nodes[0].raft.state.store.meta("retained_from_hour", 0) - first_hour
            )
        if edits is not None and self.profile.schedules:
            problem = edits.firings_problem({n.name: n.raft.state.store for n in self.nodes}, ws_ms)
            if problem is not None:
                raise Violation(*problem)

    def check_dead_letters(self, dead: set[str]) -> None:
        """The dead-letter queue of the workload's group (``--lateness``): alike on every
        node, and each message dead-lettered as late in it at most once (in it at all only
        if the group had acknowledged a message of its topic by then)."""
        topic = dlq_topic(GROUP)
        logs = [n.raft.state.store.read_ready(topic) for n in self.nodes]
        if any(not np.array_equal(log, logs[0]) for log in logs):
            raise Violation("late-policy", f"{topic}'s ready logs differ between nodes")
        ids = Counter(_row_ids(self.nodes[0].raft.state.store, logs[0])[1])
        twice = sorted(mid for mid in dead if ids[mid] > 1)
        if twice:
            raise Violation("late-policy", f"dead-lettered more than once in {topic}: {twice[:10]}")
        self.counts["late messages in the dead-letter queue"] = sum(ids[mid] for mid in dead)

    def check_push_dead_letters(self, nacked: set[str]) -> None:
        """``--push``: each message nacked at its last retry level (a nack made for it) is
        in the push group's dead-letter queue, and that queue is alike on every node.
        (Not with ``--retention``: retention trims a queue no group reads.)"""
        topic = dlq_topic(push.GROUP)
        logs = [n.raft.state.store.read_ready(topic) for n in self.nodes]
        if any(not np.array_equal(log, logs[0]) for log in logs):
            raise Violation("push-dead-letters", f"{topic}'s ready logs differ between nodes")
        store = self.nodes[0].raft.state.store
        records = store.read_records_at(logs[0]["hour"], logs[0]["global_index"])
        ids = {message_fields(record, 0, 0)["id"] for record in records}  # as a pull shows it
        missing = sorted(nacked - ids)
        if missing:
            raise Violation(
                "push-dead-letters", f"nacked at the last retry level, not in {topic}: {missing[:10]}"
            )
        self.counts["push dead letters"] = len(ids)


def _row_ids(store, rows: np.ndarray) -> tuple[list[str], list[str]]:
    """Each ready row's own message id, and the id it answers to (a moved copy's original's)."""
    places = list(map(MessageId, rows["hour"].tolist(), rows["global_index"].tolist()))
    return list(map(str, places)), list(map(str, store.original_ids(places)))


def _digest(blob: bytes) -> str:
    return hashlib.blake2b(blob, digest_size=8).hexdigest()


def fresh_dir(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path
