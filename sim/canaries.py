"""Fixes already on main, taken away one at a time by monkeypatch (in the simulator's own
process only, never in a file): the simulator must catch each, by a random seed
(tests/sim/test_canaries.py) or a scripted scenario (tests/sim/test_scenarios.py).

Each canary puts back the code as it was before its fix, with the issue it came from.
Nine more, ``fake-*``, are no fixed bug: a service that answers an edit, an extend or
a pause as made without making it, skips a schedule's firings, ignores or loses a
message past its lateness allowance, or pushes a message before its time or acks a
failed push, which the workload's checks must catch (sim/workload.py, sim/push.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from pysyncobj.serializer import Serializer

from horologe.cluster import apply_messages, consumer_groups, retention, state_machine
from horologe.cluster.consumer_groups import ID_HEADER
from horologe.cluster.errors import StoreBehindDumpError
from horologe.cluster.raft import journal as raft_journal
from horologe.cluster.raft import node, peer_clocks
from horologe.cluster.raft.append_rule import trim_append
from horologe.cluster.raft.awake_clock import AwakeClock
from horologe.cluster.raft.journal import DiskJournal
from horologe.cluster.raft.node import RaftNode
from horologe.cluster.raft.peer_clocks import PeerClock
from horologe.cluster.raft.seam import ShipmentWaits
from horologe.cluster.raft.snapshot_stream import ShippingSerializer
from horologe.cluster.schedule_plan import Plan, Planner
from horologe.node import wheel_driver
from horologe.node.consumers.service import Consumers
from horologe.node.group_commit import GroupCommit
from horologe.node.push import group as push_group
from horologe.node.quorum_clock import QuorumClock
from horologe.node.schedules.service import Schedules
from horologe.node.service import NodeService
from horologe.node.wheel_driver import WheelDriver
from horologe.storage import Transaction, durable
from horologe.storage.commit_journal import CommitJournal


def _no_commit_clamp() -> None:
    """#46 finding 3: an ``append_entries`` without ``prevLogIdx`` (a snapshot chunk, or
    pysyncobj's ``"serialized": None``) moved the follower's commit index to its own last
    index, so a former master applied its own suffix that never committed."""

    def append_as_raft_has_it(self, message: dict) -> dict:
        if "prevLogIdx" not in message or "transmission" in message:
            return message
        journal = self._journal
        return trim_append(message, journal.term_at, journal.last_idx, self.raftCommitIndex)

    RaftNode._append_as_raft_has_it = append_as_raft_has_it


def _no_append_rule() -> None:
    """1dceaa1: a follower cut every entry after ``prevLogIdx`` on each append,
    heartbeats included, not only from the first that conflicts, so a stale heartbeat
    dropped entries it had applied (pysyncobj's "truncating already-applied log entries").
    The clamp of a snapshot message's commit index stays."""
    original = RaftNode._append_as_raft_has_it

    def append_as_raft_has_it(self, message: dict) -> dict:
        if "prevLogIdx" in message:
            return message
        return original(self, message)

    RaftNode._append_as_raft_has_it = append_as_raft_has_it


def _no_forward_refusal() -> None:
    """07980b3: a leader committed a proposal another node forwarded to it, made by a
    master that had stepped down without its service learning it yet."""
    RaftNode._refuses_proposal = lambda self, forwarded: self._halted_on_loop


def _no_journal_sync() -> None:
    """42feea4: pysyncobj never syncs its journal, so "committed on a majority" meant "in
    the page cache of a majority": a power loss of every node lost acknowledged entries."""
    RaftNode._sync_journal = lambda self: None


def _no_stale_answer_check() -> None:
    """#46 (f4b03d1): a leader counted a follower's answer to an append of another term."""
    original = RaftNode._on_message

    def on_message(self, node, message) -> None:
        if isinstance(message, dict) and message.get("type") == "next_node_idx":
            message = {**message, "term": None}  # as from a node before the rule: taken as is
        original(self, node, message)

    RaftNode._on_message = on_message


def _no_finish_cut() -> None:
    """#46 finding 1: a journal holding the dump's last two entries was not cut at load, so
    pysyncobj cleared it whole after a crash between the dump's rename and the cut."""
    RaftNode._finish_cut = lambda self, raft_data: None


def _no_store_index() -> None:
    """53dfc2d: a store was measured against the dump's Raft index, not its own index in
    the dump, so a dump taken right after a new leader's no-op (an entry the store never
    applies) halted the node at its restart."""

    def check_not_behind(dump, applied_index: int, data_dir: str) -> None:
        if dump.index > applied_index:
            raise StoreBehindDumpError(
                f"the store in {data_dir} has applied up to {applied_index}; dump {dump.index}"
            )

    node.check_not_behind = check_not_behind


def _no_refusal_floor() -> None:
    """A follower's refusals of appends sent before the leader stepped its next index back
    set it back up (pysyncobj takes every refusal's index): a follower with a suffix of its
    own never caught up under steady proposals (found by the simulator's late-answer
    scenario on a link with a bandwidth)."""
    RaftNode._refusal_as_raft_has_it = lambda self, node, message: message


def _no_one_change_at_a_time() -> None:
    """pysyncobj's leader appends a change of the membership while another is uncommitted
    (it checks an index it never sets): two changes in flight make memberships whose
    majorities do not meet (the two-changes scenario)."""
    RaftNode._may_change_membership = lambda self: True


def _no_fsync_exit() -> None:
    """455868a: a failed fsync was tried again (the journal kept its dirty flag, pysyncobj's
    tick thread caught the error and ran the tick again), and Linux answers the second with
    success once it has dropped the pages the first could not write ("fsyncgate"): the node
    acknowledged and applied entries that were not on its disk. Here the failure is passed
    over at once, as that retry's success was."""
    durable._fatal = lambda err: durable.forget_failure()


def _no_fresh_quorum() -> None:
    """A master served while a majority's clock readings were stale, by quorum time held
    since they went stale: leases it handed out were stamped seconds in the past and ended
    at once (found by the simulator's node services, ``--service``)."""
    QuorumClock.fresh = QuorumClock.known


def _no_held_readings() -> None:
    """A clock reading that waited on the way (held by a link, a blackhole healed) was
    aged from its arrival only, so quorum time lagged the true time by the wait, and
    leases stamped by it ended early (found by the simulator's node services,
    ``--service``)."""
    PeerClock.held_s = lambda self: 0.0


def _no_unvouched_readings() -> None:
    """Every keep-alive's reading was taken, aged against the window's quickest: a node
    that started while its link to a peer was cut had only held keep-alives in its window
    at the heal, so quorum time lagged by their wait and leases ended early (found by the
    simulator's node services with power losses and membership changes)."""
    peer_clocks._level = lambda delays: True


def _no_wait_in_echo() -> None:
    """A keep-alive's echo held only the time since the echoed one was read, not how long
    it had waited to be read: a node woken from a pause closed a round trip that held the
    pause, half of it was taken as the transit, and quorum time ran ahead (found by the
    simulator's node services with power losses, membership changes, timed waits and held
    requests, seed 100167: a message handed out 28 ms early)."""

    def keepalive(clock_ms: int, now: float, last: PeerClock | None) -> dict:
        fields: dict = {"clock_ms": clock_ms, "sent": now}
        if last is not None and last.sent is not None:
            fields["echo"] = [last.sent, now - last.arrived]
        return fields

    node.keepalive = keepalive


def _no_applied_term() -> None:
    """5ed727b: a new master served pulls before applying an entry of its own term, so
    before the acks its predecessor had answered, and handed acked messages out again."""
    NodeService._applied_own_term = lambda self: True


def _no_noop_sync() -> None:
    """A new leader counted its own copy of its term's no-op towards a commit before that
    copy was on its disk (pysyncobj appends and applies the no-op itself): a power loss
    right after left it having applied an entry its journal did not hold (found by the
    simulator's write faults, seed 408 with --power-loss)."""
    RaftNode._noop_appended = lambda self: None


def _no_answer_sync() -> None:
    """42feea4 (its follower half): a follower told the leader it held entries that were
    still only in its page cache, and the leader counted them towards a commit."""
    original = RaftNode._answer_leader

    def answer_leader(self, node, reset, next_index, success):
        self._sync_journal = lambda: None  # shadows the method for this answer only
        try:
            original(self, node, reset, next_index, success)
        finally:
            del self._sync_journal

    RaftNode._answer_leader = answer_leader


def _no_open_unsynced() -> None:
    """A journal took the entries it read back on open as durable: a follower restarted
    after dying between a write and its fsync reported them to its leader unsynced."""
    original = DiskJournal._open

    def open_(self) -> None:
        original(self)
        self._dirty = self.torn_tail is not None

    DiskJournal._open = open_


def _no_dump_held_journal() -> None:
    """A journal's first frame torn after a snapshot install was taken for damage: entries
    up to the stored commit index were thought to be in the journal, though the dump held
    them, so a follower that lost its power just after an install could not restart."""
    original = DiskJournal._open

    def open_(self) -> None:
        self.held_to = 0
        original(self)

    DiskJournal._open = open_


def _no_own_dump_kept() -> None:
    """A follower shipped a snapshot older than its own dump (a stale reset) loaded the
    shipped one, and pysyncobj cleared its journal, which no longer held that dump's
    entries: entries the follower had acknowledged were gone from its log."""
    RaftNode._newer_own_dump = lambda self, shipped_raft_data: None


def _no_durable_receipt() -> None:
    """pysyncobj received a shipped dump into a temp file that it renamed over the node's
    own dump unsynced: a power loss during the install left a torn dump there, and the
    node halted at restart."""
    ShippingSerializer.setTransmissionData = Serializer.setTransmissionData


def _no_whole_frame_check() -> None:
    """A bad Raft journal frame was a torn tail whatever it looked like: one whose lengths
    agree and no sector of which reads back empty, as bit rot leaves and no torn write
    does, was cut, with the committed entry a follower had synced and answered for."""
    raft_journal.lost_write = lambda buf, offset, file_at=0: True


def _no_leader_sync() -> None:
    """b10ca26: the leader synced the entries it appended only before applying them, after
    it had counted its own copy towards their commit."""
    RaftNode._proposals_appended = lambda self: None


def _no_proposal_fail() -> None:
    """A node that did not lead kept the proposals waiting in its queue: pysyncobj forwards
    them to the leader, or, with no leader known, appends them once this node leads
    again, in a later term (an older release's node does this in a rolling upgrade)."""
    RaftNode._before_proposals = lambda self: None


def _no_lease_fail() -> None:
    """A master that stopped leading kept the leases its pulls had taken, not yet proposed,
    in its group commit: proposed once it led again, they committed beside the leases its
    new scans took of the same messages (the simulator's node services, seed 13 with
    --power-loss)."""
    GroupCommit.fail_waiting = lambda self, error: 0


def _no_answer_check() -> None:
    """A pull answered once its leases committed, however long that took: a master cut off
    answered, as a follower, with leases that had ended, after the new master had handed
    the same messages to another consumer (the simulator's node services, seed 98)."""
    Consumers._answerable = lambda self, group, leased, out, until: (leased, out)


def _no_stale_refusal_skip() -> None:
    """A refusal of an append sent before the follower's next index last moved back moved
    it back again, and the leader sent the rest of its log once more per such refusal: a
    follower back after seconds behind a silent link refused every append queued for it
    meanwhile, and was sent more than the link could carry (found by the simulator's
    long-silence scenario: liveness)."""

    def refusal_as_raft_has_it(self, node, message: dict) -> dict:
        index = message.get("next_node_idx")
        if not isinstance(index, int):
            return message
        term = self.raftCurrentTerm
        held = self._refused.get(node.address)
        if held is not None and held[0] == term and held[1] < index:
            return {**message, "next_node_idx": held[1]}
        self._refused[node.address] = (term, index)
        return message

    RaftNode._refusal_as_raft_has_it = refusal_as_raft_has_it


def _no_monotonic_exit() -> None:
    """A process whose monotonic clock went back (libfaketime steps it) ran on: every
    deadline it had taken lay that far ahead (cluster/raft/monotonic_watch.py)."""
    RaftNode._tick_monotonic = lambda self: None


def _no_shielded_sync() -> None:
    """A master's S entry waited on in a task that a stop of the run could cancel before its
    first step: the proposal's refusal was never taken, and asyncio logged it (the
    simulator's node services, seed 17). The wait and its let-go as they were."""

    def sync(self, now: int) -> asyncio.Task:
        committed = self._propose_sync(now)

        async def count() -> None:
            await committed
            self.syncs_led += 1
            self.last_sync_led_ms = max(now, self.last_sync_led_ms or now)

        return asyncio.get_running_loop().create_task(count())

    def let_go(syncing) -> None:
        for task in syncing:
            if not task.done():
                task.cancel()
            task.add_done_callback(wheel_driver._seen)

    WheelDriver._sync = sync
    wheel_driver._let_go = let_go


def _no_vote_sync() -> None:
    """42feea4 (its term and vote half): a node's term and vote reached its disk only with
    the next write of its commit index, up to a second later (pysyncobj never syncs its
    meta file), so a power loss could take back a vote it had sent."""

    def set_current_term(self, term, voted_for) -> None:
        self._meta["currentTerm"] = term
        self._meta["votedForNodeId"] = voted_for
        self._meta_saved = False

    DiskJournal.setCurrentTerm = set_current_term


def _set_at_start(**fields) -> None:
    """Every RaftNode built from now on has ``fields`` set as its constructor ends."""
    init = RaftNode.__init__

    def __init__(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        for name, value in fields.items():
            setattr(self, name, value)

    RaftNode.__init__ = __init__


def _no_restart_hold() -> None:
    """A node that starts grants votes at once: it does not count its start as hearing a
    leader (docs/cluster.md, "A deposed master stops at once": Restarts)."""
    _set_at_start(_leader_contact_at=float("-inf"))


def _no_pre_vote() -> None:
    """A follower whose election deadline passed stands at once, as pysyncobj has it: one
    that alone stopped hearing the master raised the term and deposed it
    (cluster/raft/pre_vote.py)."""
    RaftNode._ask_pre_vote = lambda self, now: True


def _no_joiner_applied() -> None:
    """1b6a769: a master judged whether to feed a joiner from a fresh dump by its own last
    dump alone: a node restored from a recent backup was shipped the whole store anyway."""
    judge = node.needs_fresh_dump
    node.needs_fresh_dump = lambda dump_index, commit_index, applied=0: judge(dump_index, commit_index)


def _no_awake_clock() -> None:
    """A follower judged its leader's silence by its monotonic clock: one stopped longer
    than the election timeout granted a pre-vote, or asked for one, that it read before
    its leader's append (cluster/raft/awake_clock.py)."""
    AwakeClock.read = lambda self, now: now


def _no_membership_first() -> None:
    """aadea71: a node's first tick decided whether to stand by its configured membership,
    before that tick took the one of its dump and log: a node configured alone whose start
    took longer than an election timeout stood alone and led a membership of several."""
    _set_at_start(_membership_taken=True)


def _no_cut_fsync() -> None:
    """A store's commit journal cut back to its last sync point at open was not fsynced
    before the replayed batches were appended in its place: a later power loss keeping
    some of their sectors left the dropped bytes under them, and the store refused to
    open (CorruptLogError)."""
    CommitJournal._cut = lambda self, end: self._file.truncate(end)


def _no_later_term() -> None:
    """A node dropped an append of a term earlier than its own unanswered, as pysyncobj
    does: one whose term got ahead of its leader's, its pre-votes refused while the
    members heard that leader, never stood again to carry its term to them, and followed
    no one for good (seed 700646: ``liveness``)."""
    take = RaftNode._on_message

    def on_message(self, node, message) -> None:
        term = message.get("term") if isinstance(message, dict) else None
        if isinstance(term, int) and term < self.raftCurrentTerm and message.get("type") == "append_entries":
            return
        take(self, node, message)

    RaftNode._on_message = on_message


def _no_ship_wait() -> None:
    """914a6e8: a shipment that could not go on (a file of its dump removed by retention)
    returned None, and pysyncobj's send loop began the same dump again at once, for a
    heartbeat's time: under the simulator's clock, which does not move within a tick,
    for ever."""
    original = ShippingSerializer.getTransmissionData

    def get_transmission_data(self, transmission_id):
        try:
            return original(self, transmission_id)
        except ShipmentWaits:
            return None

    ShippingSerializer.getTransmissionData = get_transmission_data


def _fake_cancel() -> None:
    """A cancel by id answered as made, and not made."""
    by_key = NodeService.cancel

    async def cancel(self, ids, keys):
        if keys:
            return await by_key(self, ids, keys)
        self.require_master()
        return [("cancelled", mid) for mid in ids]

    NodeService.cancel = cancel


def _fake_move() -> None:
    """A move by id answered as made, and not made."""
    by_key = NodeService.reschedule

    async def reschedule(self, ids, keys, deliver_at_ms):
        if keys:
            return await by_key(self, ids, keys, deliver_at_ms)
        self.require_master()
        return [("scheduled", mid) for mid in ids]

    NodeService.reschedule = reschedule


def _fake_extend() -> None:
    """An extend answered as made for every lease it names, and not made."""

    async def extend(self, group, topic, receipts, visibility_ms):
        return len(receipts), self._clock() + visibility_ms

    Consumers.extend = extend


def _fake_skip_passed() -> None:
    """A master that plans a schedule's firings from its clock, not from the mark: fire
    times that passed while none planned them (an election, an outage) are skipped rather
    than produced late (cluster/schedule_plan.py, "From the mark")."""
    plan = Planner.plan

    def plan_from_the_clock(self, meta, now_ms: int) -> Plan:
        made = plan(self, meta, now_ms)
        ahead = [replace(f, fires=tuple(t for t in f.fires if t > now_ms)) for f in made.firings]
        return Plan(ahead, made.more)

    Planner.plan = plan_from_the_clock


def _fake_pause() -> None:
    """A pause of a schedule answered as made, and not made."""

    async def pause(self, name: str) -> dict:
        return self.get(name)

    Schedules.pause = pause


def _fake_late_deliver() -> None:
    """Lateness policies ignored: every message delivered however late it falls due."""

    def within_allowance(store, tx, hour, gis, named, deliver_at, clock_ms, pending):
        return np.ones(len(gis), dtype=bool)

    apply_messages.within_allowance = state_machine.within_allowance = within_allowance


def _fake_late_lose() -> None:
    """A message past its lateness allowance neither delivered nor recorded as dropped or
    dead-lettered: lost."""
    Transaction.record_late = lambda self, mid, outcome, late_by_ms: None


def _no_kept_cancel() -> None:
    """9a064aa: a pull waited for new messages through Python 3.11's ``asyncio.wait_for``,
    which drops a cancel that comes after the wait ended and before the task ran again
    (gh-86296): a push group cancelled then (the subscription replaced, the master
    stepping down) went on leasing messages and failing each through its closed pool,
    and its worker, waiting for it, never ended. Put back as an event whose wait goes
    through ``wait_for``, as the pull's did."""

    class WaitedFor(asyncio.Event):
        async def wait(self) -> bool:
            return await asyncio.wait_for(super().wait(), 3600)

    init, notify = Consumers.__init__, Consumers.notify

    def __init__(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        self._arrived = WaitedFor()

    def notify_waited_for(self) -> None:
        notify(self)
        self._arrived = WaitedFor()

    Consumers.__init__, Consumers.notify = __init__, notify_waited_for


def _no_owner_reads() -> None:
    """93aebaf: a retry topic counted for retention only the groups with progress on it,
    so the master trimmed a group's first retries unread once ``retention_ms`` passed
    (the group has no progress on its retry topic until it acks a retry)."""
    passed = retention.passed_by_groups

    def passed_by_groups(meta_keys, progress_of, topic, base, owner_reads=False):
        return passed(meta_keys, progress_of, topic, base)

    retention.passed_by_groups = passed_by_groups


def _no_known_clock() -> None:
    """8288fd5: a master that never had a majority's clock readings stamped what it proposed
    by its own clock: one whose clocks stepped an hour ahead stamped its term's first
    entry (its push worker's barrier) so, and every running lease was moved on by the
    hour."""
    submit = NodeService.submit

    def submit_by_its_own_clock(self, kind, clock_ms=None, **fields):
        return submit(self, kind, self.clock() if clock_ms is None else clock_ms, **fields)

    NodeService.submit = submit_by_its_own_clock


def _no_retry_id() -> None:
    """A retry filed as a message of its own id, as before a retry carried its first's
    (``x-horologe-id``): a receiver that took a push and answered too late got its retry
    under another id, and could not drop it as a repeat."""
    ids = consumer_groups.retry_headers

    def retry_headers(headers, topic, mid):
        out = ids(headers, topic, mid)
        if ID_HEADER not in headers:
            del out[ID_HEADER]
        return out

    state_machine.retry_headers = retry_headers


def _fake_push_early() -> None:
    """A push group that leases messages a second before their time and sends each at once,
    not at its ``deliver_at``."""
    push_group.AHEAD_MS = 1_000
    push_group._Group._hold = lambda self, handed, now_ms: self._post(handed, now_ms)


def _fake_push_ack_failed() -> None:
    """A push group that acks every push that ended, failed or not: a message whose receiver
    answered 500 is never pushed again."""
    outcome = push_group.outcome

    def acked_all_the_same(answer, now_ms):
        sent = outcome(answer, now_ms)
        return sent._replace(ok=True)

    push_group.outcome = acked_all_the_same


CANARIES: dict[str, Callable[[], None]] = {
    "no-append-rule": _no_append_rule,
    "no-forward-refusal": _no_forward_refusal,
    "no-commit-clamp": _no_commit_clamp,
    "no-stale-answer-check": _no_stale_answer_check,
    "no-finish-cut": _no_finish_cut,
    "no-store-index": _no_store_index,
    "no-refusal-floor": _no_refusal_floor,
    "no-one-change-at-a-time": _no_one_change_at_a_time,
    "no-journal-sync": _no_journal_sync,
    "no-fsync-exit": _no_fsync_exit,
    "no-fresh-quorum": _no_fresh_quorum,
    "no-held-readings": _no_held_readings,
    "no-unvouched-readings": _no_unvouched_readings,
    "no-wait-in-echo": _no_wait_in_echo,
    "no-applied-term": _no_applied_term,
    "no-noop-sync": _no_noop_sync,
    "no-leader-sync": _no_leader_sync,
    "no-answer-sync": _no_answer_sync,
    "no-open-unsynced": _no_open_unsynced,
    "no-dump-held-journal": _no_dump_held_journal,
    "no-own-dump-kept": _no_own_dump_kept,
    "no-durable-receipt": _no_durable_receipt,
    "no-whole-frame-check": _no_whole_frame_check,
    "no-proposal-fail": _no_proposal_fail,
    "no-lease-fail": _no_lease_fail,
    "no-answer-check": _no_answer_check,
    "no-stale-refusal-skip": _no_stale_refusal_skip,
    "no-monotonic-exit": _no_monotonic_exit,
    "no-cut-fsync": _no_cut_fsync,
    "no-shielded-sync": _no_shielded_sync,
    "no-vote-sync": _no_vote_sync,
    "no-restart-hold": _no_restart_hold,
    "no-pre-vote": _no_pre_vote,
    "no-awake-clock": _no_awake_clock,
    "no-membership-first": _no_membership_first,
    "no-joiner-applied": _no_joiner_applied,
    "no-later-term": _no_later_term,
    "no-ship-wait": _no_ship_wait,
    "no-kept-cancel": _no_kept_cancel,
    "no-owner-reads": _no_owner_reads,
    "no-known-clock": _no_known_clock,
    "no-retry-id": _no_retry_id,
    "fake-cancel": _fake_cancel,
    "fake-move": _fake_move,
    "fake-extend": _fake_extend,
    "fake-skip-passed": _fake_skip_passed,
    "fake-pause": _fake_pause,
    "fake-late-deliver": _fake_late_deliver,
    "fake-late-lose": _fake_late_lose,
    "fake-push-early": _fake_push_early,
    "fake-push-ack-failed": _fake_push_ack_failed,
}


def apply(names: str | None) -> None:
    """Take away the fixes ``names`` names (comma-separated)."""
    for name in (names or "").split(","):
        if name:
            CANARIES[name]()
