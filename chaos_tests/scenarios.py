"""The named faults. Each runs while the workload runs, and marks its fault window(s).

A scenario gets a :class:`Run` and returns when the cluster should have recovered; the
runner then stops the load, drains, and checks. ``skew`` starts nodes with clocks off
(libfaketime), ``steppable`` nodes can have their clocks stepped while they run;
``early_allowance_ms`` is how early, by the true clock, a message may reach a consumer
(by the clock of the master that fired it, it may never be early).
"""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

from horologe.client import Client, HorologeError, node_role
from horologe.client.membership_change import change_until_made

from .harness import ChaosCluster
from .history import History, now_ms
from .lazyfs import LazyFS
from .schedule_load import ScheduleLoad
from .workload import Workload

SKEW_S = 30
SKEWED = 2  # the node whose clock is off
# How early by the true clock a message may reach a consumer in the clock scenarios: a
# master never runs ahead of the quorum time of fresh readings (docs/cluster.md, "Clocks"),
# and the nodes share this machine's clock, so this is only a margin for the harness.
CLOCK_EARLY_MS = 50
FOLLOWER = 0  # the follower whose clock the follower scenarios step
LOADED_SLACK = 5  # entries a restarted node may still lag by, under load, once caught up
PAUSE_S = 4.0  # SIGSTOP: beyond the 0.3-0.6 s election timeout and the 2 s leader fallback
SCHEDULE_WINDOW_S = 20  # long enough for both kills and the release to fall inside it
# Schedules planned 4 s ahead (checked every 200 ms) rather than 60 s: every master of the
# run has firings of its own to plan, so planning has to go on across each failover.
SCHEDULE_TOML = "schedule_horizon_ms = 4000\nschedule_check_ms = 200\n"


@dataclass
class Run:
    cluster: ChaosCluster
    workload: Workload
    history: History
    rng: random.Random
    disk: LazyFS | None = None  # where node data lives, for power_loss
    violations: list[str] = field(default_factory=list)
    retired: set[int] = field(default_factory=set)  # nodes removed from the membership

    @contextmanager
    def fault(self, name: str):
        start = now_ms()
        print(f"  fault: {name}", flush=True)
        try:
            yield
        finally:
            self.history.add("faults", name=name, start_ms=start, end_ms=now_ms())

    def undo_faults(self) -> None:
        """After a fault that went wrong midway: every proxy on and free of toxics, every
        stopped node continued, every member not running started again."""
        c = self.cluster
        c.topology.heal()
        for i in self.members():
            if i in c.alive():
                c.signal(i, signal.SIGCONT)
            else:
                c.start(i)
        self.note("faults undone after the failure")

    def note(self, text: str) -> None:
        print(f"  {text}", flush=True)
        self.history.notes.append(text)

    def drain(self) -> None:
        """Stop producing and wait until consumers got what is owed (noted where they did not)."""
        self.workload.stop_producing()
        print(f"  load stopped: {len(self.history.produced)} acknowledged; draining", flush=True)
        left = self.workload.drain()
        if left:
            self.note(f"{len(left)} owed messages still unconsumed when the drain gave up")

    def tear_down(self) -> None:
        """Stop the load, the nodes and their proxies."""
        self.workload.stop()
        self.cluster.stop_all()
        self.cluster.close()
        self.cluster.topology.destroy()

    def others(self, i: int) -> list[int]:
        return [j for j in self.members() if j != i]

    def members(self) -> list[int]:
        """The nodes of the membership: every node started, less those removed."""
        return [i for i in self.cluster.indexes if i not in self.retired]

    def add_node(self) -> int:
        """Start one more node to join (its peers: the members, through proxies on a chaos
        cluster) and add it through the master; its index, once it is a member."""
        c = self.cluster
        k = c.joiner(self.members())
        c.start(k)
        c.wait_serving(k)
        node_id, raft = f"n{k + 1}", f"127.0.0.1:{c.raft_ports[k]}"
        self._change(k, lambda client: client.add_member(node_id, raft, c.member_http(k), 120), True)
        self.note(f"{node_id} added")
        return k

    def remove_node(self, i: int) -> None:
        """Remove node ``i`` from the membership (the master hands over first); it stays as
        it is (running or down) for the caller to stop."""
        node_id = f"n{i + 1}"

        def ask(client: Client) -> list[dict]:
            try:
                return client.remove_member(node_id)
            except HorologeError as e:
                if e.code != "is_master":
                    raise
                self.release()
                return client.remove_member(node_id)

        self._change(i, ask, False)
        self.retired.add(i)
        self.note(f"{node_id} removed")

    def _change(self, i: int, ask: Callable[[Client], list[dict]], member_after: bool) -> None:
        """Ask the master (through a client of it) for a change of node ``i``'s membership
        until it is made (whether ``i`` is a member after it: ``member_after``), as
        docs/api.md says: after an answer that leaves it unsure, the members are listed, and
        the change asked again only if they lack it (horologe/client/membership_change.py)."""
        c = self.cluster
        among = [j for j in self.members() if j != i and j in c.alive()]
        client = c.client(c.wait_leader(among), retry_s=10, timeout=10)
        change_until_made(client, f"n{i + 1}", lambda: ask(client), member_after, self.note)

    def release(self, to: int | None = None) -> dict:
        """Force the master to hand over (to node ``to``), retrying a refused handover.

        Without ``to``, until every node agrees on another master. With it, the answer names
        the new master, which the linked nodes follow: the caller waits for what it needs,
        since the new master may hand over again at once (a clock off the quorum's), faster
        than the nodes' statuses are read."""
        c = self.cluster
        for _ in range(5):
            m = c.wait_leader()
            if to is not None and m == to:
                return {"old_master": f"n{m + 1}", "new_master": f"n{m + 1}", "gap_ms": 0}
            try:
                res = c.client(m, retry_s=0, timeout=20).release_master(None if to is None else f"n{to + 1}")
            except HorologeError as e:
                self.note(f"release from n{m + 1} refused ({e}); again")
                time.sleep(1)  # a pause before retrying: a refused handover is not retried hot
                continue
            if to is None:
                c.wait_leader(exclude=m)
            return res
        raise RuntimeError("the master would not hand over")

    def last_sync_led_ms(self, i: int) -> int:
        """The proposer clock of the latest committed wheel sync node i proposed (0: none)."""
        deadline = time.monotonic() + 10
        while True:
            try:
                return self.cluster.status(i)["wheel"]["last_sync_led_ms"] or 0
            except HorologeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def sigkill_master(run: Run) -> None:
    c = run.cluster
    old = c.wait_leader()
    with run.fault(f"SIGKILL master n{old + 1}"):
        c.signal(old, signal.SIGKILL)
        new = c.wait_leader(run.others(old), exclude=old)
    run.note(f"n{new + 1} leads; n{old + 1} restarts in 3 s")
    time.sleep(3)  # the fault: the cluster runs without the old master for a while
    c.start(old)
    c.catch_up(old, behind=LOADED_SLACK)


def sigkill_follower(run: Run) -> None:
    c = run.cluster
    victim = run.rng.choice(run.others(c.wait_leader()))
    with run.fault(f"SIGKILL follower n{victim + 1}, down 5 s"):
        c.signal(victim, signal.SIGKILL)
        time.sleep(5)  # the fault's length: the follower stays down 5 s
    c.start(victim)
    c.catch_up(victim, behind=LOADED_SLACK)


def sigstop_master(run: Run) -> None:
    """The old master must commit nothing after waking: every committed sync it proposed
    carries a clock reading from before the pause. (One proposed just before the pause
    may be committed later, by the next master: that one decided nothing new.)"""
    c = run.cluster
    old = c.wait_leader()
    with run.fault(f"SIGSTOP master n{old + 1} for {PAUSE_S:g} s"):
        c.signal(old, signal.SIGSTOP)
        stopped = now_ms()  # after: a sync proposed before the signal landed may commit
        new = c.wait_leader(run.others(old), exclude=old)
        time.sleep(max(0.0, PAUSE_S - (now_ms() - stopped) / 1000))
        c.signal(old, signal.SIGCONT)
    c.wait_connected()
    # The woken master's wheel gets 2 s to propose syncs from a stale belief; one that
    # committed would show in last_sync_led_ms. No condition marks the end of that chance.
    time.sleep(2)
    last = run.last_sync_led_ms(old)
    run.note(
        f"n{new + 1} led while n{old + 1} slept; n{old + 1}'s last committed sync was proposed "
        f"{stopped - last} ms before the SIGSTOP"
    )
    if last >= stopped:
        run.violations.append(f"n{old + 1} committed a wheel sync proposed after waking (at {last})")


def isolate_master(run: Run) -> None:
    """As with SIGSTOP: nothing the isolated master proposes once cut off may commit."""
    c = run.cluster
    old = c.wait_leader()
    with run.fault(f"isolate master n{old + 1} from every other node, 6 s"):
        c.topology.isolate(old)
        cut = now_ms()  # after every proxy is off: a sync proposed before may still commit
        new = c.wait_leader(run.others(old), exclude=old)
        time.sleep(6)  # the fault's length: the old master stays cut off, long past its leader fallback
        role = node_role(c.status(old)["role"])  # a node's old "slave" reads as follower
        c.topology.heal()
    c.wait_connected()
    last = run.last_sync_led_ms(old)
    run.note(
        f"n{new + 1} led; the isolated n{old + 1} was {role} at the end; its last committed sync "
        f"was proposed {cut - last} ms before the cut"
    )
    if last >= cut:
        run.violations.append(
            f"isolated n{old + 1} committed a wheel sync proposed after the cut (at {last})"
        )


def one_way_partition(run: Run) -> None:
    c = run.cluster
    m = c.wait_leader()
    s = run.rng.choice(run.others(m))
    with run.fault(f"cut n{m + 1} -> n{s + 1} only, 8 s"):
        c.topology.cut(m, s)
        time.sleep(8)  # the fault's length
        c.topology.heal()
    run.note(f"master n{c.wait_connected() + 1} after healing")


def raft_latency(run: Run) -> None:
    c = run.cluster
    with run.fault("latency 100 ms +- 50 ms on every Raft link, 10 s"):
        c.topology.raft_latency(100, 50)
        time.sleep(10)  # the fault's length
        c.topology.heal()
    c.wait_connected()


def clock_skew(run: Run) -> None:
    """n3's clock runs 30 s ahead. Given the wheel, it fires by quorum time, never by its
    own clock, and hands the wheel over by itself."""
    c = run.cluster
    before = c.status(SKEWED)["clock_handovers"]
    with run.fault(f"master -> n{SKEWED + 1} (clock +{SKEW_S} s)"):
        run.release(to=SKEWED)
        _wait_handed_on(run, SKEWED)
    after = c.status(SKEWED)["clock_handovers"]
    if after <= before:
        run.violations.append(f"n{SKEWED + 1} led with a clock {SKEW_S} s off and did not hand over")


def clock_step(offset_s: int) -> Callable[[Run], None]:
    def step(run: Run) -> None:
        c = run.cluster
        if c.wait_leader() != SKEWED:
            run.release(to=SKEWED)
        with run.fault(f"step master n{SKEWED + 1}'s clock {offset_s:+d} s"):
            c.step(SKEWED, offset_s)
            _wait_handed_on(run, SKEWED)
            time.sleep(3)  # a window on purpose: delivery must go on without it meanwhile
        # libfaketime steps the monotonic clock too, which no NTP step does: stepped back,
        # the node ends itself (cluster/raft/monotonic_watch.py). Bring it back with the true
        # clock, as an operator would, so the run ends with three stores to check.
        _restart_with_true_clock(run, SKEWED)

    step.__doc__ = f"""The master's clock steps {offset_s:+d} s while it runs (libfaketime steps its
    monotonic clock too, so Raft may depose it first). Nothing is delivered early by the
    true clock, another node goes on delivering, and the node, its clock set right and
    restarted, catches up."""
    return step


def clock_step_follower(offset_s: int) -> Callable[[Run], None]:
    def step(run: Run) -> None:
        c = run.cluster
        if c.wait_leader() == FOLLOWER:
            run.release(to=SKEWED)
        with run.fault(f"step follower n{FOLLOWER + 1}'s clock {offset_s:+d} s"):
            c.step(FOLLOWER, offset_s)
            # Read within 1 s, then 5 s of its readings. Stepped ahead, its Raft deadlines
            # pass at once and it may start an election; stepped back, it ends itself.
            time.sleep(6)
        _restart_with_true_clock(run, FOLLOWER)

    step.__doc__ = f"""A follower's clock steps {offset_s:+d} s while it runs: one clock of three, so
    quorum time does not move, and nothing is delivered early by the true clock."""
    return step


def clock_step_dead_follower(run: Run) -> None:
    """Two faults: a follower's clock steps +1 h and it is SIGKILLed 2 s later, its last
    reading an hour ahead; then the master's clock steps +1 h. A reading counts only
    while fresh (1.5 s), so the master is held to the survivor's clock and hands over,
    and the survivor runs by its own: nothing is delivered early by the true clock."""
    c = run.cluster
    if c.wait_leader() == FOLLOWER:
        run.release(to=SKEWED)
    with run.fault(f"step follower n{FOLLOWER + 1}'s clock +3600 s, SIGKILL it 2 s later"):
        c.step(FOLLOWER, 3600)
        time.sleep(1 + 2)  # libfaketime reads the step within 1 s; then 2 s at +1 h
        c.signal(FOLLOWER, signal.SIGKILL)
        c.step(FOLLOWER, 0)  # for its restart, below
    time.sleep(2)  # its last reading goes stale (older than 1.5 s)
    alive = run.others(FOLLOWER)
    if c.wait_leader(alive) != SKEWED:
        run.release(to=SKEWED)
    with run.fault(f"step master n{SKEWED + 1}'s clock +3600 s, n{FOLLOWER + 1} dead an hour ahead"):
        c.step(SKEWED, 3600)
        _wait_handed_on(run, SKEWED, among=[i for i in alive if i != SKEWED])
        time.sleep(3)  # a window on purpose: delivery must go on, never early, meanwhile
    c.start(FOLLOWER)
    c.catch_up(FOLLOWER, behind=LOADED_SLACK)
    _restart_with_true_clock(run, SKEWED)


def _restart_with_true_clock(run: Run, node: int) -> None:
    """Set ``node``'s clock right, SIGKILL and restart it (one whose faked monotonic clock
    stepped back has ended itself: cluster/raft/monotonic_watch.py), and wait until it caught up."""
    c = run.cluster
    c.step(node, 0)
    if c.procs[node].poll() is None:
        c.signal(node, signal.SIGKILL)
    c.start(node)
    c.catch_up(node, behind=LOADED_SLACK)


def _wait_handed_on(run: Run, node: int, timeout_s: float = 30.0, among: list[int] | None = None) -> None:
    t0 = time.monotonic()
    new = run.cluster.wait_leader(among or run.others(node), exclude=node, timeout_s=timeout_s)
    took = time.monotonic() - t0
    exit_code = run.cluster.procs[node].poll()
    if exit_code is not None:  # a monotonic clock stepped back: the node ended itself
        run.note(f"n{new + 1} leads {took:.1f} s later; n{node + 1} ended itself (exit code {exit_code})")
        return
    offset = run.cluster.status(node)["clock_offset_ms"]
    run.note(f"n{new + 1} leads {took:.1f} s later; n{node + 1}'s clock is {offset} ms off the quorum's")


def forced_release_x10(run: Run) -> None:
    gaps = []
    with run.fault("10 forced releases in a row"):
        for _ in range(10):
            gaps.append(run.release()["gap_ms"])
            time.sleep(1)  # the scenario: a release every second or so, under load
    run.note(f"release gaps ms: {gaps}")


def rolling_restart(run: Run) -> None:
    c = run.cluster
    m = c.wait_leader()
    with run.fault("rolling restart: each follower, then the master"):
        for i in [*run.others(m), m]:
            c.stop(i)
            time.sleep(1)  # down a moment, as in a real rolling restart
            c.start(i)
            c.catch_up(i, behind=LOADED_SLACK)
            c.wait_connected()


def _master_not_stepped(run: Run) -> int:
    """The master, once it is not a node whose clock other scenarios step (``FOLLOWER``,
    ``SKEWED``): such a master hands over to another member first."""
    c = run.cluster
    master = c.wait_leader()
    if master in (FOLLOWER, SKEWED):
        run.release(next(i for i in run.members() if i not in (FOLLOWER, SKEWED) and i in c.alive()))
        master = c.wait_leader()
    return master


def replace_master_machine(run: Run) -> None:
    """The master's machine is replaced under load: a new node joins and is added, then the
    master is removed (it hands over first) and stopped for good. A node whose clock other
    scenarios step (``FOLLOWER``, ``SKEWED``) is never the one replaced: the soak runs them
    after this one, so such a master first hands over to another member."""
    c = run.cluster
    old = _master_not_stepped(run)
    with run.fault(f"n{old + 1}'s machine replaced: one node added, then n{old + 1} removed and stopped"):
        run.add_node()
        run.remove_node(old)
        c.stop(old)
        c.wait_leader(run.members())
    c.wait_connected()


def replace_master_while_follower_down(run: Run) -> None:
    """The master's machine is replaced while a follower is down: the new node is added
    and made master, the old master removed and stopped. Back, the follower's log lacks
    the new master; it catches up from it without deposing it (docs/deploy.md, "A member
    that missed an add"): a new term while it returns fails the run. The nodes replaced
    and stopped are never those whose clocks other scenarios step, as in
    ``replace_master_machine``."""
    c = run.cluster
    old = _master_not_stepped(run)
    down = run.rng.choice([i for i in run.others(old) if i in c.alive()])
    with run.fault(f"n{down + 1} down while n{old + 1}'s machine is replaced by a node made master"):
        c.stop(down)
        new = run.add_node()
        run.release(new)
        run.remove_node(old)
        c.stop(old)
        leader = c.wait_leader(run.others(down))
        term = c.status(leader)["term"]
    with run.fault(f"n{down + 1} back, its log without n{new + 1}"):
        c.start(down)
        c.catch_up(down, behind=LOADED_SLACK)
    after = c.status(leader)
    if (after["role"], after["term"]) != ("master", term):
        run.violations.append(
            f"n{leader + 1} ({after['role']}) went from term {term} to {after['term']} "
            f"while n{down + 1}, which missed its add, came back"
        )
    run.note(f"n{down + 1} caught up; n{leader + 1} is {after['role']} in term {after['term']}")
    c.wait_connected()


def _grow_to_five(run: Run) -> None:
    with run.fault("grown from 3 to 5 nodes, one add after the other"):
        run.add_node()
        run.add_node()
    run.cluster.wait_connected()


def grow_to_five_kill_two(run: Run) -> None:
    """3 → 5 nodes under load, then the master and one more are SIGKILLed: the three
    others elect and serve until the two come back."""
    c = run.cluster
    _grow_to_five(run)
    m = c.wait_leader()
    victims = [m, run.rng.choice(run.others(m))]
    with run.fault(f"SIGKILL n{victims[0] + 1} (the master) and n{victims[1] + 1}, down 5 s"):
        for v in victims:
            c.signal(v, signal.SIGKILL)
        c.wait_leader([i for i in run.members() if i not in victims], exclude=m)
        time.sleep(5)
    for v in victims:
        c.start(v)
    for v in victims:
        c.catch_up(v, behind=LOADED_SLACK)
    c.wait_connected()


def shrink_while_down(run: Run) -> None:
    """3 → 5 nodes under load, then a follower is SIGKILLed and, while it is down, removed
    with another follower (5 → 3), which is then stopped. Neither is a node whose clock
    other scenarios step (``FOLLOWER``, ``SKEWED``): the soak runs them after this one."""
    c = run.cluster
    _grow_to_five(run)
    m = c.wait_leader()
    down, alive = run.rng.sample([i for i in run.others(m) if i not in (FOLLOWER, SKEWED)], 2)
    with run.fault(f"n{down + 1} SIGKILLed, then n{down + 1} and n{alive + 1} removed, n{alive + 1} stopped"):
        c.signal(down, signal.SIGKILL)
        run.remove_node(down)
        run.remove_node(alive)
        c.stop(alive)
        c.wait_leader(run.members())
    c.wait_connected()


def crash_mid_write(run: Run) -> None:
    """SIGKILL the master while 1,000-message batches of 2 KB bodies stream in."""
    c = run.cluster
    m = c.wait_leader()
    halt = threading.Event()

    def heavy() -> None:
        client = run.workload.new_client(timeout=10, retry_s=10)
        while not halt.is_set():
            run.workload.send_batch(client, 1000, body_bytes=2048)

    writer = threading.Thread(target=heavy, daemon=True)
    writer.start()
    time.sleep(run.rng.uniform(0.5, 2.0))  # on purpose: the kill lands at a random point of the writes
    with run.fault(f"SIGKILL master n{m + 1} during 2 MB batch appends"):
        c.signal(m, signal.SIGKILL)
        c.wait_leader(run.others(m), exclude=m)
    halt.set()
    writer.join(30)
    c.start(m)
    c.catch_up(m, behind=LOADED_SLACK)


def power_loss(run: Run) -> None:
    """Every node loses power at once: SIGKILL, then every write not yet fsynced (or
    msynced) is gone, as on a real power cut. Restarted on what was durable, the nodes must
    still deliver every acknowledged message, once."""
    c = run.cluster
    with run.fault("power loss of all three nodes"):
        for i in c.indexes:
            os.kill(c.procs[i].pid, signal.SIGKILL)
        for i in c.indexes:
            c.procs[i].wait()
        run.disk.lose_power()
        run.disk.start()
        c.start_all()


def power_loss_out_of_order(run: Run) -> None:
    """The same power loss, on a disk that keeps some of the unsynced sectors, each by its
    own draw (LazyFS ``--out-of-order``): a journal may come back with a later frame on
    disk and an earlier one zeros. Each node opens at what its journals hold before the
    damage (docs/storage.md, "Recovery on open"; docs/cluster.md, the Raft journal) and
    the cluster still delivers every acknowledged message, once."""
    power_loss(run)


# A dump every 100 entries: one every few hundred milliseconds under the workload.
DUMP_OFTEN_TOML = "log_compaction_min_entries = 100\n"
# What a node logs when its Raft journal is cleared (cluster/raft/journal.py).
JOURNAL_CLEARED = "cleared for a snapshot"


def power_loss_at_dump(run: Run) -> None:
    """The power goes right after a node renamed a Raft dump into place, before it cut its
    journal (a compaction spans two ticks: docs/cluster.md, safety rules). Restarted, that
    node finishes the cut instead of clearing its journal after the dump (which dropped
    entries it had acknowledged); every acknowledged message is still delivered, once."""
    c = run.cluster
    with run.fault("power loss right after a Raft dump's rename"):
        run.disk.arm_cut()
        deadline = time.monotonic() + 30
        while not run.disk.cut_happened:
            if time.monotonic() > deadline:
                run.violations.append("no node renamed a dump into place within 30 s")
                return
            time.sleep(0.005)
        for i in c.indexes:
            os.kill(c.procs[i].pid, signal.SIGKILL)
        for i in c.indexes:
            c.procs[i].wait()
        node = int(re.search(r"/n(\d+)/raft/", run.disk.cut_where()).group(1)) - 1
        before = len(c.log(node))
        run.disk.lose_power()
        run.disk.start()
        c.start_all()
    c.wait_leader()
    restart_log = c.log(node)[before:]
    run.note(f"n{node + 1} lost power after renaming its dump into place")
    if JOURNAL_CLEARED in restart_log:
        run.violations.append(f"n{node + 1} cleared its journal at restart: what followed its dump is gone")
    elif "finishing the journal cut" in restart_log:
        run.note(f"n{node + 1} finished the interrupted journal cut at restart")
    else:
        run.note(f"n{node + 1} found its journal already cut")


def reschedule_sigkill_master(run: Run) -> None:
    """Messages due a few seconds ahead, a third of them moved (later, sooner, some twice,
    by id and by key, alone and in batches) while the master is SIGKILLed twice and
    restarted: each moved message is received once, at the time it was last moved to."""
    for _ in range(2):
        time.sleep(run.rng.uniform(0.5, 2.0))  # on purpose: the kill lands among the moves
        sigkill_master(run)


def schedules_sigkill_master(run: Run) -> None:
    """Two recurring schedules created over the API, one firing every second (UTC), one
    every 2 s in Asia/Kathmandu, with a window of ``SCHEDULE_WINDOW_S``: the master is
    SIGKILLed, forced to release, and SIGKILLed again while they fire. Each fire time of
    the window is received, once, never early, keyed ``schedule:<name>:<fire ms>``
    (schedule_checker.py). A short planning horizon (``SCHEDULE_TOML``) makes each new
    master plan the next firings itself."""
    load = ScheduleLoad(run.workload.urls, run.workload.token, run.history)
    try:
        end = load.create(SCHEDULE_WINDOW_S, lead_s=2)
        run.note(f"schedules fire for {SCHEDULE_WINDOW_S} s: {load.expected()} fire times")
        start = end - SCHEDULE_WINDOW_S * 1000
        # on purpose: the first kill lands among firings, 1-2 s into the window
        time.sleep(max(0, start - now_ms()) / 1000 + run.rng.uniform(1.0, 2.0))
        sigkill_master(run)
        time.sleep(run.rng.uniform(0.5, 1.5))
        with run.fault("forced release"):
            run.note(f"release: {run.release()}")
        time.sleep(run.rng.uniform(0.5, 1.5))
        sigkill_master(run)
        late = [f["name"] for f in run.history.snapshot("faults") if f["start_ms"] >= end]
        if late:
            run.note(f"began after the schedules' window, so not under their firings: {', '.join(late)}")
        load.drain(end)
    finally:
        load.stop()


@dataclass(frozen=True)
class Scenario:
    run: Callable[[Run], None]
    quick: bool = False  # in `make test`
    workload: dict = field(default_factory=dict)  # Workload's options, beyond its defaults
    skew: dict[int, int] = field(default_factory=dict)  # node index -> clock offset, s
    steppable: tuple[int, ...] = ()  # nodes whose clocks the scenario steps while they run
    power_loss: bool = False  # node data on chaos_tests/lazyfs.py, which run.disk controls
    power_cut_on_rename: str | None = None  # a rename run.disk.arm_cut() cuts the power after
    out_of_order: bool = False  # a power loss keeps some unsynced sectors (lazyfs --out-of-order)
    early_allowance_ms: int = 0
    node_toml: str = ""  # node settings beyond the harness's


SCENARIOS = {
    "sigkill_master": Scenario(sigkill_master),
    "sigkill_follower": Scenario(sigkill_follower),
    "sigstop_master": Scenario(sigstop_master),
    "isolate_master": Scenario(isolate_master),
    "one_way_partition": Scenario(one_way_partition),
    "raft_latency": Scenario(raft_latency),
    "clock_skew": Scenario(clock_skew, quick=True, skew={SKEWED: SKEW_S}, early_allowance_ms=CLOCK_EARLY_MS),
    "clock_step_ahead": Scenario(
        clock_step(3600), quick=True, steppable=(SKEWED,), early_allowance_ms=CLOCK_EARLY_MS
    ),
    "clock_step_behind": Scenario(clock_step(-3600), steppable=(SKEWED,), early_allowance_ms=CLOCK_EARLY_MS),
    "clock_step_follower_ahead": Scenario(
        clock_step_follower(3600), steppable=(FOLLOWER,), early_allowance_ms=CLOCK_EARLY_MS
    ),
    "clock_step_follower_behind": Scenario(
        clock_step_follower(-3600), steppable=(FOLLOWER,), early_allowance_ms=CLOCK_EARLY_MS
    ),
    "clock_step_dead_follower": Scenario(
        clock_step_dead_follower, steppable=(FOLLOWER, SKEWED), early_allowance_ms=CLOCK_EARLY_MS
    ),
    "forced_release_x10": Scenario(forced_release_x10, quick=True),
    "rolling_restart": Scenario(rolling_restart),
    "power_loss": Scenario(power_loss, quick=True, power_loss=True),
    "power_loss_out_of_order": Scenario(power_loss_out_of_order, power_loss=True, out_of_order=True),
    "power_loss_at_dump": Scenario(
        power_loss_at_dump, power_loss=True, power_cut_on_rename="snapshot", node_toml=DUMP_OFTEN_TOML
    ),
    "crash_mid_write": Scenario(crash_mid_write),
    "replace_master_machine": Scenario(replace_master_machine),
    "replace_master_while_follower_down": Scenario(replace_master_while_follower_down, quick=True),
    "grow_to_five_kill_two": Scenario(grow_to_five_kill_two),
    "shrink_while_down": Scenario(shrink_while_down),
    "reschedule_sigkill_master": Scenario(
        reschedule_sigkill_master,
        workload={"horizon_ms": 8_000, "hot_share": 0.1, "reschedule_share": 0.35},
    ),
    "schedules_sigkill_master": Scenario(
        schedules_sigkill_master, quick=True, workload={"horizon_ms": 4_000}, node_toml=SCHEDULE_TOML
    ),
}
