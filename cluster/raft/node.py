"""The Raft shell around the state machine: pysyncobj, proposals, snapshots, handover.

pysyncobj runs its own tick thread, which owns the writer (loop_crossing.py states the
thread rule): it applies entries, writes and installs snapshots, and after each of
these publishes the committed state. Everything for the event loop (what was applied,
proposals' outcomes, role changes, transfers) crosses through one ``LoopCrossing``,
in order; nothing here blocks the event loop.

pysyncobj's Raft log is a :class:`~horologe.cluster.raft.journal.DiskJournal`, which also
states the durability rule that ``_sync_journal`` and the hooks below enforce.

``RaftNode`` reaches pysyncobj only through :class:`~horologe.cluster.raft.seam.SyncObjSeam`
(seam.py): its overrides of pysyncobj's private methods call the hooks here (``_on_message``,
``_answer_leader``, ``_refuses_proposal``, ``_proposals_appended``, ``_followers_held_back``,
``_may_compact``, ``_clears_journal_on_load``), and its accessors name pysyncobj's members.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import shutil
import time
from collections.abc import Awaitable, Callable
from typing import NamedTuple, TypeVar

from pysyncobj import FAIL_REASON, SyncObjConf, replicated
from pysyncobj.monotonic import monotonic as monotonic_time
from pysyncobj.syncobj import _RAFT_STATE
from pysyncobj.transport import Transport

from horologe.storage import Storage
from horologe.storage.commit_journal import CommitJournal
from horologe.storage.store_reads import CommittedState

from ..apply_result import ApplyResult
from ..errors import (
    InsecureConfigError,
    MembershipChangeError,
    ProposalTimeoutError,
    StoreBehindDumpError,
)
from ..state_machine import StateMachine
from .append_rule import trim_append
from .awake_clock import AwakeClock
from .backup_point import BackupPoint, take_point
from .bounded_frames import BoundedTcpConnection
from .dial_node import DialNode
from .dump_file import DumpWriter, LocalDump, check_not_behind, read_shipped
from .journal import DiskJournal
from .loop_crossing import LoopCrossing, settle, within
from .membership import (
    Joining,
    Member,
    members_of,
    needs_fresh_dump,
    only_own_elections,
    self_after,
)
from .monotonic_watch import MonotonicWatch, exit_for_step
from .peer_clocks import PeerClock, keepalive, received
from .pre_vote import LATER_TERM, PRE_VOTE, PRE_VOTE_ANSWER, Round, would_vote
from .proposal_outcome import not_committed
from .seam import Parts, SyncObjSeam, check_pysyncobj
from .settings import ClusterSettings
from .snapshot_stream import ShippingSerializer
from .status import FIGURES_EVERY_S, STARTING, RaftStatus, Role
from .wire import RaftCipher
from .writer_questions import WriterQuestions

log = logging.getLogger(__name__)

KEEPALIVE = "horologe_keepalive"  # a message type pysyncobj does not use
# How many keep-alive periods a master waits, once a learner holds and applied the log,
# for a reading of its clock before it adds it all the same (_tick_membership).
CLOCK_WAIT_KEEPALIVES = 4
# What a lease gives up of the election timeout: the clocks' rates, a tick's lateness.
LEASE_MARGIN_S = 0.05
# The answer to a change proposed by a master that stopped leading before it committed.
PROPOSED_THEN_LOST = "this node stopped being the master with the change proposed: it may still be made"


T = TypeVar("T")


class Applied(NamedTuple):
    """What the tick thread publishes after an apply (``result``) or a snapshot install (None)."""

    result: ApplyResult | None
    committed: CommittedState
    halted: str | None  # why this replica stopped applying, if it did
    skipped: int  # bad entries recorded and skipped (the latest 100 at most)


class RaftNode(SyncObjSeam):
    def __init__(
        self,
        settings: ClusterSettings,
        state: StateMachine,
        crossing: LoopCrossing,
        on_applied: Callable[[Applied], None],
        on_role: Callable[[bool], None],
        clock: Callable[[], int] | None = None,
        observe_apply: Callable[[float], None] = lambda seconds: None,
        observe_fsync: Callable[[float], None] = lambda seconds: None,
        auto_tick: bool = True,
        on_monotonic_step: Callable[[float], None] = exit_for_step,
        transport_class: type[Transport] | None = None,
    ) -> None:
        """``on_applied`` and ``on_role`` (True: this node leads now) run on the event loop,
        through ``crossing``. ``clock`` (wall ms) is sent to peers on every keep-alive; see
        :meth:`peer_clocks`. ``observe_apply(seconds)`` is told, on the tick thread, how
        long each entry took to apply, and ``observe_fsync(seconds)`` how long each fsync
        of the Raft journal took. ``on_monotonic_step(seconds)`` is called, on the tick
        thread, when the monotonic clock went back (monotonic_watch.py: the process ends).

        With ``auto_tick`` False pysyncobj starts no tick thread: the caller ticks the node
        itself (``doTick``), one step at a time, as the in-process tests of the Raft shell do.
        ``transport_class`` is pysyncobj's ``transportClass``: TCP (the wire, wire.py) unless
        a simulator (sim/) passes its own network.
        """
        if not settings.cluster_secret and not settings.insecure_dev:
            raise InsecureConfigError(
                "no cluster secret: anyone reaching the Raft port could run code on this node "
                "(set cluster_secret or HOROLOGE_CLUSTER_SECRET; --insecure-dev only for local tests)"
            )
        check_pysyncobj()
        self.settings = settings
        self.state = state
        self._observe_apply = observe_apply
        self._observe_fsync = observe_fsync
        # Changes of the leader this node knows (tick thread writes, any thread reads).
        self.leader_changes = 0
        # Answers to appends dropped for naming another term than this node's (tick thread
        # writes; a leader's, in practice: only a leader is sent answers).
        self.stale_answers = 0
        self._known_leader: str | None = None
        self._known_term: int | None = None  # None until the first tick (tick thread)
        self._crossing = crossing
        self._on_applied = on_applied
        self._on_role = on_role
        raft_dir = os.path.join(settings.data_dir, "raft")
        os.makedirs(raft_dir, exist_ok=True)
        self._dump = DumpWriter(os.path.join(raft_dir, "snapshot"), state.store.checkpoint_record)
        conf = SyncObjConf(
            password=settings.cluster_secret or None,
            journalFile=os.path.join(raft_dir, "journal"),
            fullDumpFile=os.path.join(raft_dir, "snapshot"),
            serializer=self._write_dump,
            serializeChecker=self._dump.state,
            deserializer=self._read_snapshot,
            appendEntriesUseBatch=False,
            appendEntriesBatchSizeBytes=settings.append_batch_bytes,
            raftMinTimeout=settings.raft_min_timeout,
            raftMaxTimeout=settings.raft_max_timeout,
            appendEntriesPeriod=settings.heartbeat_s,
            autoTickPeriod=settings.idle_tick_s,  # the longest wait: _tick_wait
            leaderFallbackTimeout=settings.leader_fallback_timeout,
            logCompactionMinEntries=settings.log_compaction_min_entries,
            logCompactionMinTime=settings.log_compaction_min_time,
            bindAddress=settings.bind,
            dynamicMembershipChange=True,  # membership.py
            connectionRetryTime=settings.connect_retry_s,
            onStateChanged=self._state_changed,
            autoTick=auto_tick,
        )
        self._configured = {p.raft: p for p in settings.peers}
        self._configured_nodes = [DialNode(p.raft, p.dial, p.node_id, p.http) for p in settings.peers]
        self._self_node = DialNode(settings.raft, None, settings.node_id, settings.http)
        # The membership (membership.py), tick thread: whether this node votes (a node
        # started to join does not until its log holds the change adding it), the node
        # being added, and the changes the loop asked for.
        self._voter = not settings.join
        self._joining: Joining | None = None
        # A removal proposed and not yet answered: its answer (tick thread), once.
        self._removing: Callable[[tuple[str, str] | None], None] | None = None
        self._membership_asks: queue.SimpleQueue = queue.SimpleQueue()
        # The membership as of the applied index (what a dump at that index holds), and
        # whether the log's tail is still to be taken at the first tick (no dump to load:
        # pysyncobj loads one at its first tick, and _dump_loaded takes the tail then).
        # Both set before pysyncobj is built: its tick thread may load the dump at once.
        self._applied_members: set[DialNode] = self._configured_cluster()
        self._tail_to_take = not os.path.exists(conf.fullDumpFile)
        # Until the first tick has taken the membership of the dump and the log (its tick
        # callbacks run after both), the node knows only the configured one: it may stand
        # in no election before (_ask_pre_vote).
        self._membership_taken = False
        self._changes_seen: tuple[int, int | None] = (0, None)  # _membership_settled: (index, term)
        self._last_change = 0  # the index of the last change of the membership it saw
        self._journal: DiskJournal | None = None
        self._refuse_success = False  # set when a shipped snapshot failed to install
        self._installed_at: int | None = None  # the index of a snapshot just installed
        # address -> the peer's latest reading (tick thread writes, peer_clocks reads); set
        # before pysyncobj is built, since its messages reach _on_message from then on
        self._peer_clocks: dict[str, PeerClock] = {}
        # The read lease (docs/cluster.md, "A deposed master stops at once"), tick thread:
        # as a follower, when it last heard its leader's append, and that append's send
        # time by the leader's clock (echoed back); as a leader, the latest send time of
        # its own appends each follower echoed in an answer of this term.
        # A restart counts as hearing a leader: the node may have heard one just before.
        # A follower's contact is by the time its tick thread ran through (awake_clock.py).
        self._awake = AwakeClock(monotonic_time(), 2 * settings.idle_tick_s)
        self._leader_contact_at = self._awake.read(monotonic_time())
        self._leader_sent: tuple[str, float] | None = None  # (leader's address, sent at)
        self._acked_sent: dict[str, float] = {}
        # A follower's lowest refusal since its last ack, by address: (term, next index).
        self._refused: dict[str, tuple[int, int]] = {}
        # When a refusal last moved a follower's next index back, by address: (term, at).
        self._stepped_back: dict[str, tuple[int, float]] = {}
        self._former_lease = 0.0  # the lease this node held when it last stepped down
        # (term, until when) of an election a transfer asked this node to stand in
        self._transfer_election: tuple[int, float] | None = None
        self.votes_withheld = 0  # votes refused while a leader's lease could hold
        # The pre-vote (pre_vote.py), tick thread: the round under way; the term a round
        # won, which pysyncobj may stand in at the next tick; the members whose keep-alives
        # say they answer no pre-vote (an older version).
        self._pre_vote: Round | None = None
        self._pre_voted: int | None = None
        self._without_pre_vote: set[str] = set()
        self.pre_votes_refused = 0  # pre-votes this node refused while it heard a leader

        def create_journal(path: str) -> DiskJournal:
            # Set before the tick thread starts, so the tick thread's hooks below find it.
            self._journal = journal = DiskJournal(path, held_to=self._dump.held_to())
            term, vote = journal.getCurrentTerm(), journal.getVotedForNodeId()
            dumped = os.path.exists(conf.fullDumpFile)
            own = vote in (None, self._self_node.id)
            if settings.join and own and only_own_elections(term, journal.entry_terms, dumped):
                log.warning("joining: term %d is of elections this node stood in alone; starting at 0", term)
                journal.setCurrentTerm(0, None)
            return journal

        parts = Parts(
            journal=create_journal,
            serializer=ShippingSerializer,
            serializer_args=(
                self._dump,
                state.store.directory,
                self._ask_for_dump,
                settings.ship_chunk_bytes,
            ),
            encryptor=RaftCipher.from_secret,
            connection=BoundedTcpConnection,
        )
        super().__init__(self._self_node, list(self._configured_nodes), conf, parts, transport_class)
        self.addOnTickCallback(self._tick_membership)
        self.addOnTickCallback(self._tick_voter)
        self._transfer: tuple[str | None, float, Callable[[bool], None]] | None = None
        self.addOnTickCallback(self._tick_transfer)
        self._next_halted_transfer = 0.0
        self.addOnTickCallback(self._tick_halted)
        self._next_keepalive = 0.0
        # A leader the members name that this node's membership lacks (it was added while
        # this node was down or cut off), linked to outside the membership; and the
        # leaders so named already, each holding this node's elections off once (tick thread).
        self._named_leader: DialNode | None = None
        self._leaders_named: set[str] = set()
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self.addOnTickCallback(self._tick_keepalive)
        self.addOnTickCallback(self._tick_leader)
        # Loop-owned, written only by what the tick thread posts through the crossing.
        self.status = STARTING
        self._halted_on_loop = False
        self._published = STARTING  # tick thread: the status it last posted, and when
        self._published_at = 0.0
        self.addOnTickCallback(self._tick_status)
        self._monotonic = MonotonicWatch(monotonic_time())
        self._on_monotonic_step = on_monotonic_step
        self.addOnTickCallback(self._tick_monotonic)
        self._questions = WriterQuestions(crossing, self.wake_tick_thread)
        self.addOnTickCallback(lambda: self._questions.answer_all(self.state.store))

    # -- the one replicated method ----------------------------------------------

    @replicated
    def apply_entry(self, blob: bytes) -> ApplyResult:
        # Never raises (field notes: a raising entry is retried forever).
        self._crossing.require_off_loop("applying an entry")
        index = self.raftLastApplied + 1
        self._sync_journal()  # durable here before it is applied, and so before it is acked
        term = self.entry_term(index)
        started = time.perf_counter()
        res = self.state.apply(index, blob, term)
        self._observe_apply(time.perf_counter() - started)
        self._publish(res)
        return res

    def _publish(self, res: ApplyResult | None) -> None:
        state = self.state
        applied = Applied(res, state.store.published(), state.halted, len(state.errors))
        # The status rides along, so the loop never knows an applied index past its commit.
        self._crossing.post(self._applied_on_loop, applied, self._status_to_post())

    def _applied_on_loop(self, applied: Applied, status: RaftStatus) -> None:
        self.status = status
        self._halted_on_loop = applied.halted is not None
        self._on_applied(applied)

    def _halt(self, why: str) -> None:
        """Halt the replica outside an apply (a snapshot it cannot load), and tell the loop."""
        self.state.halt(why)
        self._crossing.post(self._halted_outside_apply)

    def _halted_outside_apply(self) -> None:  # on the loop
        self._halted_on_loop = True

    def halt_damaged(self, why: str, generation: int) -> None:
        """On the loop: a read there, at the store's ``generation``, found this replica's
        files damaged. The tick thread halts it between applies, as an apply that met the
        damage would: it hands leadership over and never campaigns (:meth:`_tick_halted`)."""
        self._questions.tell(lambda store: self._halt_damaged(why, generation, store))

    def _halt_damaged(self, why: str, generation: int, store: Storage) -> None:  # tick thread
        if self.state.halted is not None:
            return
        if store.generation != generation:
            # A shipped snapshot replaced the files since: the loop read new files at the
            # old state's offsets before it followed the new state. Nothing is damaged.
            log.warning("not halting for a read during a snapshot install: %s", why)
            return
        self.state.halt(why)
        self._publish(None)  # the loop's view says halted, and it proposes nothing

    def _tick_status(self) -> None:
        """Post this node's :class:`RaftStatus` to the loop when it changed (tick thread)."""
        status = self._status_now()
        last = self._published
        now = monotonic_time()
        if status.decisive() != last.decisive() or (
            status != last and now - self._published_at >= FIGURES_EVERY_S
        ):
            self._published, self._published_at = status, now
            self._crossing.post(self._take_status, status)

    def _status_to_post(self) -> RaftStatus:  # tick thread
        """The status now, noted as the last one posted (the caller posts it)."""
        self._published, self._published_at = self._status_now(), monotonic_time()
        return self._published

    def _status_now(self) -> RaftStatus:  # tick thread
        if self._isLeader():
            role = Role.MASTER
        elif self.is_candidate():
            role = Role.CANDIDATE
        else:
            role = Role.FOLLOWER
        return RaftStatus(
            role,
            self.raftCurrentTerm,
            self.leader_address(),
            frozenset(self.linked_peers()),
            self.serializer.shipping(),
            self._member_clocks(),
            self.leader_changes,
            self.stale_answers,
            self._dump.last,
            self._lease_until(),
            self._members(),
            self._membership_settled(),
            self.raftCommitIndex,
            self._journal.bytes,
        )

    def _clock_fresh(self, node) -> bool:
        """Whether a reading of ``node``'s clock was taken from its keep-alives
        (peer_clocks.py) within two keep-alive periods: fresh still when it starts to count."""
        clock = self._peer_clocks.get(node.address)
        fresh = 2 * self.settings.link_keepalive_s
        return clock is not None and clock.ms is not None and clock.age_s(monotonic_time()) < fresh

    def _member_clocks(self) -> tuple[PeerClock, ...]:
        """The clocks of the members: a learner's is kept (``_on_message``), but counts for
        nothing until it is added."""
        members = {node.address for node in self.otherNodes}
        return tuple(clock for address, clock in self._peer_clocks.items() if address in members)

    def _take_status(self, status: RaftStatus) -> None:  # on the loop
        self.status = status

    def _state_changed(self, old: int, new: int) -> None:  # tick thread
        if (old == _RAFT_STATE.LEADER) != (new == _RAFT_STATE.LEADER):
            if old == _RAFT_STATE.LEADER:
                self._former_lease = self._lease_from_echoes()  # no vote before it ran out
                self.serializer.cancel_all()  # a follower's shipment ends with its leader
            self._acked_sent.clear()  # a lease is of one leadership
            # The status goes with the role: a pull the role change wakes must find it.
            self._crossing.post(self._role_on_loop, new == _RAFT_STATE.LEADER, self._status_to_post())

    def _role_on_loop(self, leads: bool, status: RaftStatus) -> None:
        self.status = status
        self._on_role(leads)

    async def propose(self, blob: bytes, timeout: float | None = None) -> ApplyResult:
        """Propose an entry; resolve when this node has applied it (after its Applied was posted)."""
        return await self.submit(blob, timeout)

    def submit(self, blob: bytes, timeout: float | None = None) -> Awaitable[ApplyResult]:
        """Propose an entry now, before returning; await the answer to learn when this node
        has applied it. Proposals submitted one after another are in the log in that order."""
        fut: asyncio.Future[ApplyResult] = asyncio.get_running_loop().create_future()

        def done(res, err) -> None:  # on the tick thread (or at once, here, when refused)
            self._crossing.post(settle, fut, res, None if err == FAIL_REASON.SUCCESS else not_committed(err))

        self.apply_entry(blob, callback=done)
        why = "entry neither committed nor rejected in time"
        return within(fut, timeout or self.settings.proposal_timeout_s, ProposalTimeoutError, why)

    def _refuses_proposal(self, forwarded: bool) -> bool:
        """Refuse every proposal forwarded by another node, and this node's own while it
        is halted (the seam denies them, ``SyncObjSeam._applyCommand``).

        pysyncobj hands a proposal to the leader when its proposer is no longer leader.
        Horologe proposes only on the master (clients are redirected there), so a
        forwarded proposal comes from a deposed master that has not yet learnt it was
        deposed, say one just woken from a pause. Committing it would let that master
        decide (advance the wheel, release) after losing its place. Its proposer gets
        REQUEST_DENIED instead.

        A halted replica proposes nothing either: it is handing leadership over, and
        pysyncobj denies a transfer while the target's log is behind the leader's. A log
        that grows by one entry a wheel turn keeps every follower just behind it, so that
        transfer could be denied turn after turn (seen: 20 s with no master).
        """
        if forwarded:
            log.warning("refused a proposal forwarded by another node (a deposed master)")
            return True
        return self._halted_on_loop  # set on the loop, where this node proposes

    def _before_proposals(self) -> None:
        """A node that does not lead fails the proposals waiting in its queue (NOT_LEADER):
        pysyncobj would hand them to the leader, whose refusal (``_refuses_proposal``)
        comes a round trip later, or, with no leader known, keep them and append them if
        this node leads again, in a later term. An entry made under one lead would then
        commit under another: the simulator's node services saw a pull's leases, taken
        and proposed just before the master stepped down and forgotten with its role,
        committed after it was elected again, and the same messages handed to a second
        consumer by a scan that had not seen them."""
        if not self._isLeader():
            self.fail_waiting_proposals(FAIL_REASON.NOT_LEADER)

    def _proposals_appended(self) -> None:
        """pysyncobj's leader has appended the waiting proposals to its log and sent them to
        the followers. It syncs them at once, while the followers write theirs: its own
        copy is on disk before the next tick counts it towards a commit (which the
        followers then learn and apply), and its fsync no longer waits for their answers
        (the apply's sync finds nothing left to do)."""
        self._sync_journal()

    def _noop_appended(self) -> None:
        """A new leader's no-op: synced at once, as proposals are. The leader counts its own
        copy towards the commit of every entry, and the no-op's commit also commits the
        entries of earlier terms below it; pysyncobj applies the no-op itself, so no
        apply's sync would come first (the simulator: a leader that lost power right after
        had applied an entry its disk did not hold)."""
        self._sync_journal()

    def _answer_leader(self, node, reset: bool, next_index: int | None, success: bool) -> None:
        """A follower's answer to the leader: entries it reports having are on disk first,
        and the answer names the term it answers in (pysyncobj's carries none; the leader
        drops answers of other terms, ``_on_message``) and the index it applied (a master
        adds a learner once it applied the log it must hold: ``_tick_membership``)."""
        if success and self._refuse_success:
            self._refuse_success = False  # a snapshot this follower could not install
            return
        if success:
            self._sync_journal()
        installed, self._installed_at = self._installed_at, None
        if next_index is None:
            # After an install, from the snapshot's index on: entries kept after it
            # (_clears_journal_on_load) are counted once the leader's next append checks them.
            last = self.last_log_index() if installed is None else installed
            next_index = last + 1
        self.transport.send(
            node,
            {
                "type": "next_node_idx",
                "next_node_idx": next_index,
                "reset": reset,
                "success": success,
                "term": self.raftCurrentTerm,
                "applied": self.raftLastApplied,
                **self._echo(node),
            },
        )

    def _echo(self, node) -> dict:
        """The send time of the leader's latest append heard, for its lease (_lease_until)."""
        sent = self._leader_sent
        return {"echo": sent[1]} if sent is not None and sent[0] == node.address else {}

    def _sync_journal(self) -> None:
        # The durability rule (journal.py): before an ack to the leader, and before an apply.
        started = time.perf_counter()
        if self._journal.sync():
            self._observe_fsync(time.perf_counter() - started)

    # -- questions for the writer -----------------------------------------------

    def ask_writer(
        self,
        question: Callable[[Storage], T],
        timeout: float | None = None,
        undo: Callable[[Storage], object] | None = None,
    ) -> Awaitable[T]:
        """On the loop: ``question(store)`` answered on the tick thread, between applies
        (writer_questions.py); only reads, and quick ones: the tick thread waits for it.
        ``undo(store)`` runs there after it when the answer does not reach the asker."""
        return self._questions.ask(question, timeout or self.settings.proposal_timeout_s, undo)

    def take_backup(self, name: str) -> Awaitable[BackupPoint]:
        """On the loop: the store hard-linked for a backup named ``name``, between applies
        on the tick thread, with the Raft entries it ends at (cluster/backup/). The caller
        removes the links once it took them; the links of a point that did not reach it (a
        timeout, a cancelled request) are removed on the tick thread."""
        return self.ask_writer(
            lambda store: self.backup_point(store, name), undo=lambda store: store.unlink_backup(name)
        )

    def backup_point(self, store, name: str) -> BackupPoint:
        """``store`` hard-linked for a backup named ``name``, with the Raft entries it ends
        at; on the tick thread, between two applies."""
        journal = self._journal

        def entry_at(index: int):
            return journal[index - journal[0][1]]

        return take_point(store, name, entry_at, self.raftLastApplied, self.raftCurrentTerm)

    # -- links ------------------------------------------------------------------

    def _tick_keepalive(self) -> None:
        """Send every linked peer, and a learner this master feeds, a keep-alive with this
        node's clock reading.

        It keeps links read (``ClusterSettings.link_keepalive_s``) and lets each node know
        the others' clocks (node/quorum_clock.py). Only to peers whose link finished its
        handshake: a message sent earlier would be taken for the encryption key exchange.
        It names the leader this node follows (or itself, leading): a member back from
        being down learns of a leader added meanwhile (:meth:`_link_named_leader`). A
        learner's echo of it makes the learner's clock known here, and it is added only
        then (``_tick_membership``): a master whose new member made its majority (one
        member down) served nothing for 0.5 s after the add, its quorum clock short of a
        majority's readings until two keep-alives had crossed.
        """
        now = monotonic_time()
        if now < self._next_keepalive:
            return
        self._next_keepalive = now + self.settings.link_keepalive_s
        clock_ms = self._clock()
        leader = self.leader_address()
        for node in self.otherNodes | self.readonly_nodes:
            if self.isNodeConnected(node):
                last = self._peer_clocks.get(node.address)
                clock = keepalive(clock_ms, now, last)
                self.transport.send(node, {"type": KEEPALIVE, "leader": leader, PRE_VOTE: True, **clock})

    def _link_named_leader(self, address: object) -> None:
        """A member names the leader it follows. One outside this node's membership was
        added while this node was down or cut off: pysyncobj's transport dials only the
        nodes it knows and refuses the others' calls, so its appends, which bring the
        change, would never arrive, and this node would stand for election again and again,
        each new term deposing that leader (its members take the term). It is linked to
        as a learner is, outside the membership, and its appends are taken as any
        leader's (Raft's rule); this node asks it for no vote. Named the first time, it
        holds this node's election off for an election timeout, for its link to come up.
        The link goes once the leader this node follows is another (:meth:`_tick_leader`);
        taken as a member, it stays (``TransportSeam.addNode``)."""
        if not isinstance(address, str) or address == self.settings.raft or self._isLeader():
            return
        named = self._named_leader
        if named is not None and named.address == address:
            return
        if any(node.address == address for node in self.otherNodes | self.readonly_nodes):
            return
        peer = self._configured.get(address)
        try:
            node = DialNode(address, peer.dial if peer else None)
        except ValueError:
            return  # not host:port
        self._forget_named_leader()
        self._named_leader = node
        self.transport.addNode(node)
        if address not in self._leaders_named:
            self._leaders_named.add(address)
            held_off = monotonic_time() + self.settings.raft_max_timeout
            self.election_deadline = max(self.election_deadline, held_off)
        log.info("the members follow %s, which this node's membership lacks: linking to it", address)

    def _forget_named_leader(self) -> None:
        """Drop the link to the leader :meth:`_link_named_leader` made, unless it has
        become a member (or a learner) since."""
        node, self._named_leader = self._named_leader, None
        if node is not None and node not in self.otherNodes and node not in self.readonly_nodes:
            self.forget_link(node)

    def _on_message(self, node, message) -> None:
        """Every message from a peer: keep-alives are this shell's own; appends and answers
        are taken as Raft has it; the rest goes to pysyncobj as it came."""
        kind = message.get("type") if isinstance(message, dict) else None
        outside = node not in self.otherNodes
        if kind == "request_vote" and outside:
            # A candidate outside the membership this node has in its log: a removed node,
            # or one whose addition this node has yet to hear of (the members that have
            # elect). Its term is not taken either: a removed node would depose leaders.
            return
        if kind == "request_vote" and self._withholds_vote(node, message):
            # Its term is taken as Raft has it (a leader steps down: the candidate's term is
            # later), its vote refused: to pysyncobj the candidate's log looks behind
            # (syncobj.py:929). Dropped whole, the term would not be learnt, and a node back
            # from a partition at a later term would ignore the leader's appends for good.
            self.votes_withheld += 1
            message = {**message, "last_log_term": -1}
        asked = kind == "timeout_now" and message.get("term", -1) >= self.raftCurrentTerm
        if asked and node == self._getLeader():
            # pysyncobj stands for election at its next tick (syncobj.py:911-916), clearing its
            # own transfer flag before it asks for votes (:637): the term is kept here.
            until = monotonic_time() + self.settings.raft_min_timeout
            self._transfer_election = (self.raftCurrentTerm + 1, until)
        if kind == KEEPALIVE:
            clock = received(message, monotonic_time(), self._peer_clocks.get(node.address))
            if clock is not None and (not outside or node in self.readonly_nodes):
                # a learner's clock is kept, to count once it is added (_member_clocks)
                self._peer_clocks[node.address] = clock
            if not outside:  # nor does a learner name leaders
                if (
                    self._isLeader()
                    and message.get("leader") == self.settings.raft
                    and self.serializer.taking_snapshot(node)
                ):
                    # A follower taking a snapshot answers nothing until it is in and installed
                    # (syncobj.py:1022): its keep-alives, which name this leader, count as its
                    # answers, or a leader whose other followers are down would step down
                    # within leader_fallback_timeout, and ship the snapshot again in each term.
                    self.last_answered[node] = monotonic_time()
                self._link_named_leader(message.get("leader"))
                if message.get(PRE_VOTE):
                    self._without_pre_vote.discard(node.address)
                else:
                    self._without_pre_vote.add(node.address)
            return
        if kind == PRE_VOTE:
            if not outside:  # as for a vote: a removed node's asks are not answered
                self._answer_pre_vote(node, message)
            return
        if kind == PRE_VOTE_ANSWER:
            if not outside and message.get("granted") is True:
                self._take_pre_vote(node, message.get("term"))
            return
        if kind == LATER_TERM:
            if not outside:
                self._take_later_term(node, message.get("term"))
            return
        if kind == "next_node_idx":
            self.serializer.answered(node)  # a snapshot it took, if any, is installed
        if kind == "append_entries":
            term = message.get("term")
            if isinstance(term, int) and term < self.raftCurrentTerm:
                # pysyncobj drops an append of an earlier term unanswered (syncobj.py:945);
                # its sender learns this node's term (pre_vote.py, "A term ahead").
                self.transport.send(node, {"type": LATER_TERM, "term": self.raftCurrentTerm})
                return
            self._heard_leader(node, message)
            message = self._append_as_raft_has_it(message)
        elif kind == "next_node_idx":
            term = message.get("term")
            if term is not None and term != self.raftCurrentTerm:
                # An answer to an append of another term: from a leadership of this node's
                # before it lost and regained the lead, the follower's log may have been
                # rewritten since, so its index would count entries the follower no longer
                # has towards a commit of this term. (An answer without a term comes from a
                # node older than this rule, in a rolling upgrade: taken as pysyncobj would.)
                self.stale_answers += 1
                return
            echo = message.get("echo")
            if isinstance(echo, (int, float)) and term is not None and self._isLeader():
                self._acked_sent[node.address] = max(self._acked_sent.get(node.address, 0.0), echo)
            joining = self._joining
            if joining is not None and node == joining.node:
                joining.heard_applied(message.get("applied"))
            if message.get("success"):
                self._refused.pop(node.address, None)
                self._take_ack(node, message)
                return
            if message.get("reset"):
                message = self._refusal_as_raft_has_it(node, message)
        self._pysyncobj_on_message(node, message)

    # -- the pre-vote (pre_vote.py) --------------------------------------------------

    def _before_tick(self) -> bool:
        """Each tick: the clock of the time this node ran through moves on, then a
        follower may ask for a pre-vote. Whether it may stand in this tick."""
        now = monotonic_time()
        self._awake.tick(now)
        return self._ask_pre_vote(now)

    def _ask_pre_vote(self, now: float) -> bool:
        """A follower (or a candidate that lost) whose election deadline passed asks its
        members for a pre-vote first, and its deadline moves on by a fresh election
        timeout. It may stand in this tick (the answer) only if its deadline passed by
        ``now`` and a round won for the term it would stand in, or a transfer asked for
        the election (its target stands at once: the old master serves nothing
        meanwhile). A single node stands at once. None stands before its first tick has
        taken the membership of its dump and log.

        A deadline that passed while this node was stopped (awake_clock.py) moves on by
        what is left of an election timeout of the time it ran through: its leader's
        append may be waiting on its link, not yet read, as etcd's raft counts its own
        ticks to its election."""
        if self._isLeader() or not self._voter or not self._membership_taken or self.election_deadline >= now:
            return False
        term = self.raftCurrentTerm + 1
        transfer = self._transfer_election
        if self._pre_voted == term or (transfer and transfer[0] == term and now < transfer[1]):
            self._pre_voted = None
            return True
        members = frozenset(n.address for n in self.otherNodes)
        awake = self._awake.read(now)
        silence = awake - self._leader_contact_at
        if members and silence < self.settings.raft_min_timeout:
            # A tick ahead at least: what is left may be a hair, and the next tick would come at once.
            self.election_deadline = now + max(self.random_election_timeout() - silence, self.settings.tick_s)
            return False
        pre_vote = Round(term, awake, members, granted=set(members & self._without_pre_vote))
        if pre_vote.won():
            return True
        self._pre_vote = pre_vote
        self.election_deadline = now + self.random_election_timeout()
        # It has not heard its leader for an election timeout: until it does again, it
        # names none (its readiness and status say so), as etcd's raft has a
        # pre-candidate drop its leader; an append of the leader's sets it again.
        self.followed_leader = None
        last = self.last_log_index()
        ask = {
            "type": PRE_VOTE,
            "term": term,
            "last_log_index": last,
            "last_log_term": self.entry_term(last) or 0,
        }
        for node in self.otherNodes:
            self.transport.send(node, ask)
        return False

    def _take_later_term(self, node, term: object) -> None:
        """A member answered an append with a term later than this node's: as Raft has
        it, this node takes the term and steps down if it leads. pysyncobj does so for a
        vote request of a later term (syncobj.py:920-923); one that names no log is
        refused the vote, as a withheld vote is."""
        if not isinstance(term, int) or term <= self.raftCurrentTerm:
            return
        log.info("a member is in term %d, later than this node's %d: taking it", term, self.raftCurrentTerm)
        ask = {"type": "request_vote", "term": term, "last_log_index": -1, "last_log_term": -1}
        self._pysyncobj_on_message(node, ask)

    def _answer_pre_vote(self, node, message: dict) -> None:
        """A member asks whether this node would vote for it (pre_vote.py says when)."""
        term, last, last_term = (message.get(k) for k in ("term", "last_log_index", "last_log_term"))
        if not all(isinstance(v, int) for v in (term, last, last_term)):
            return
        own = self.last_log_index()
        granted = would_vote(term, self.raftCurrentTerm, (last_term, last), (self.entry_term(own) or 0, own))
        if granted and self._withholds_vote(node, message):
            granted = False
            self.pre_votes_refused += 1
        self.transport.send(node, {"type": PRE_VOTE_ANSWER, "term": term, "granted": granted})

    def _take_pre_vote(self, node, term: object) -> None:
        """A member would vote for this node in ``term``: once a majority would, and no
        leader was heard since the round began, pysyncobj stands at the next tick."""
        pre_vote = self._pre_vote
        if pre_vote is None or term != pre_vote.term or term != self.raftCurrentTerm + 1:
            return
        pre_vote.grant(node.address)
        if pre_vote.won():
            self._pre_vote = None
            if self._leader_contact_at < pre_vote.began:
                self._pre_voted = pre_vote.term
                self.election_deadline = 0.0

    # -- the read lease -------------------------------------------------------------
    #
    # A leader serves reads and hand-outs only while a majority has heard one of its appends
    # within the election timeout; a node that heard its leader that recently (or a leader
    # whose lease holds) grants no vote unless a transfer asked for the election, so no
    # other leader can be elected while the lease holds. docs/cluster.md ("A deposed master
    # stops at once") says why.

    def _outgoing(self, node, message):
        """Appends carry their send time (echoed in the answers: the lease); a vote request
        of an election a transfer asked for says so (voters drop others within a lease)."""
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "append_entries":
            return {**message, "sent_at": monotonic_time()}
        transfer = self._transfer_election
        if kind == "request_vote" and transfer and message.get("term") == transfer[0]:
            if monotonic_time() < transfer[1]:  # stood for at once, as the transfer asked
                return {**message, "transfer": True}
        return message

    def _heard_leader(self, node, message: dict) -> None:
        """A follower heard an append of the current term or a later one: no vote for
        another node for the election timeout, and the append's send time for the answer."""
        term = message.get("term")
        if isinstance(term, int) and term >= self.raftCurrentTerm:
            self._leader_contact_at = self._awake.read(monotonic_time())
            self._pre_voted = None  # a round won before: not a licence to stand later
            sent = message.get("sent_at")
            self._leader_sent = (node.address, sent) if isinstance(sent, (int, float)) else None

    def _withholds_vote(self, candidate, message: dict) -> bool:
        """Whether to refuse a vote while a leader's lease may hold: this node leads and its
        lease holds, or led until it stepped down with its lease still holding, or heard
        its leader within the election timeout of the time it ran through (a restart
        counts; a stop of its own counts one step: awake_clock.py). An election a
        transfer asked for is answered as Raft has it: the old leader serves nothing
        meanwhile (it is releasing, or halted); so is the leader last heard, standing
        again (the lease is its own)."""
        if message.get("transfer"):
            return False
        now = monotonic_time()
        if now < self._former_lease:
            return True
        if self._isLeader():
            return now < self._lease_until()
        last = self._leader_sent
        if last is not None and last[0] == candidate.address:
            return False
        return self._awake.read(now) - self._leader_contact_at < self.settings.raft_min_timeout

    def _lease_until(self) -> float:
        """Until when (monotonic s) this leader may serve: the latest send time a majority
        (itself included) has echoed, plus the election timeout less :data:`LEASE_MARGIN_S`."""
        return self._lease_from_echoes() if self._isLeader() else 0.0

    def _lease_from_echoes(self) -> float:
        peers = self.otherNodes  # the membership as this leader has it in its log
        need = (1 + len(peers)) // 2  # followers' echoes that make a majority with its own
        if need == 0:
            return float("inf")
        echoed = sorted((self._acked_sent.get(p.address, 0.0) for p in peers), reverse=True)
        if echoed[need - 1] == 0.0:
            return 0.0
        return echoed[need - 1] + self.settings.raft_min_timeout - LEASE_MARGIN_S

    def lease_held(self) -> bool:
        """On the loop: whether this node leads and its read lease holds now, as last
        published (a later lease than the one published only makes it hold longer)."""
        status = self.status
        return status.is_master and monotonic_time() < status.lease_until

    def _append_as_raft_has_it(self, message: dict) -> dict:
        """An ``append_entries`` as pysyncobj's follower should take it.

        With a place in the log (``prevLogIdx``), the append rule (append_rule.py) keeps
        what the follower holds of the leader's log. Without one (a snapshot chunk, or
        pysyncobj's empty ``"serialized": None``), nothing says the follower's entries are
        the leader's, yet pysyncobj would commit up to min(leader's commit, own last index):
        a former master would apply its own suffix that never committed. Such a message
        moves the commit index nowhere; the next append with a place in the log does.
        """
        commit = self.raftCommitIndex
        if "prevLogIdx" not in message:
            return {**message, "commit_index": min(message.get("commit_index", commit), commit)}
        if "transmission" in message:  # a large entry in parts: pysyncobj's own path
            return message
        journal = self._journal
        return trim_append(message, journal.term_at, journal.last_idx, commit)

    def _take_ack(self, node, message: dict) -> None:
        """A follower's ack, without moving back what the leader has sent it.

        pysyncobj's leader sends ahead of the acks (each send moves the follower's next
        index past what it sent), but sets the next index to the acked one on every ack:
        under load an ack is overtaken by later sends, so the leader sent those again, and
        once it had compacted its log past them it shipped the follower a whole snapshot
        (seen under saturating ingest: shipments, then elections). An ack moves the match
        index; only a refusal (``reset``) moves the next index back, as Raft has it."""
        next_index = self.next_index
        sent = next_index.get(node)
        self._pysyncobj_on_message(node, message)
        moved_back = sent is not None and next_index.get(node, sent) < sent
        if moved_back and not message.get("reset") and self._isLeader():
            next_index[node] = sent

    def _refusal_as_raft_has_it(self, node, message: dict) -> dict:
        """A follower's refusal, never setting its next index above one it refused lower
        since its last ack.

        Each refusal names an index the follower's agreement with the leader ends below (a
        mismatch at the append's previous entry, or the end of a shorter log). pysyncobj's
        leader sends ahead of the answers and sets the next index to each refusal's: a
        follower with a suffix of its own is stepped back one entry a round trip, and the
        refusals of appends sent before the step (past its shorter log) set it back up, so
        under steady proposals it never reaches the entry where the logs agree (the
        simulator's late-answer scenario on a link with a bandwidth). Until an ack, the
        lowest refusal of this term stands; lower is always safe: the next append is
        checked against its previous entry again.

        A refusal of an append sent before the next index last moved back (its ``echo``,
        the append's send time) moves nothing: the appends sent since answer for
        themselves. Each such refusal set the index back again, and the leader sent the
        whole rest of its log once more: a follower back after seconds behind a silent
        link (a blackhole: the appends queued for it all along) refused each queued append,
        and was sent the log once per refusal, more than the link could carry (the
        simulator's long-silence scenario).
        pysyncobj still counts it as an answer (``reset`` off)."""
        index = message.get("next_node_idx")
        if not isinstance(index, int):
            return message
        term = self.raftCurrentTerm
        echo = message.get("echo")
        back = self._stepped_back.get(node.address)
        if back is not None and back[0] == term and isinstance(echo, (int, float)) and echo < back[1]:
            return {**message, "reset": False}
        self._stepped_back[node.address] = (term, monotonic_time())
        held = self._refused.get(node.address)
        if held is not None and held[0] == term and held[1] < index:
            return {**message, "next_node_idx": held[1]}
        self._refused[node.address] = (term, index)
        return message

    def _tick_monotonic(self) -> None:
        back = self._monotonic.went_back(monotonic_time())
        if back is not None:
            self._on_monotonic_step(back)

    def peer_clocks(self) -> list[tuple[int, float]]:
        """On the loop: the latest clock reading of each peer heard from, as last published
        (ms, seconds since it was read: since it arrived, plus the link's transit;
        cluster/raft/peer_clocks.py), aged by the clock the arrivals were stamped with."""
        return self.status.clock_readings(monotonic_time())

    def linked_peers(self) -> set[str]:
        """Raft addresses of the peers this node has a live, handshaken link to."""
        return {node.address for node in self.otherNodes | self.readonly_nodes if self.isNodeConnected(node)}

    # -- roles ------------------------------------------------------------------

    def _tick_leader(self) -> None:
        """Count changes of the leader this node knows: one lost, or another heard of
        (``onStateChanged`` tells only of this node's own role). A leader the members
        named (:meth:`_link_named_leader`) loses its link once another is followed.
        Each change of the term or of the leader is a line of the log (none for the
        term a node starts in while it knows no leader)."""
        leader, term = self.leader_address(), self.raftCurrentTerm
        if leader == self._known_leader and term == self._known_term:
            return
        if leader != self._known_leader:
            self._known_leader = leader
            self.leader_changes += 1
            named = self._named_leader
            if named is not None and leader is not None and leader != named.address:
                self._forget_named_leader()
        if self._known_term is not None or leader is not None:
            if self.is_candidate():
                role = "standing for election"
            elif leader is None:
                role = "no leader known"
            else:
                role = "leading" if self.is_master() else f"following {leader}"
            log.info("term %d: %s", term, role)
        self._known_term = term

    # Methods, not properties: SyncObj.__init__ calls getattr on every attribute.
    def is_master(self) -> bool:
        return self._isLeader()

    def current_term(self) -> int:
        """This node's Raft term (a plain read of pysyncobj's int: safe from any thread)."""
        return self.raftCurrentTerm

    def leader_address(self) -> str | None:
        leader = self._getLeader()
        return None if leader is None else leader.address

    # -- the membership (membership.py) --------------------------------------------

    def _members(self) -> tuple[Member, ...]:  # tick thread
        joining = self._joining
        learners = ()
        if joining is not None:
            learners = ((joining.node, (self.match_index.get(joining.node, 0), joining.target)),)
        return members_of(self._self_node, self._voter, self.otherNodes, learners, self._known)

    def _known(self, address: str) -> tuple[str, str] | None:
        peer = self._configured.get(address)
        return None if peer is None else (peer.node_id, peer.http)

    def _configured_cluster(self) -> set[DialNode]:
        own = set() if self.settings.join else {self._self_node}
        return own | set(self._configured_nodes)

    def _write_dump(self, tmp_path: str, raft_data) -> None:
        """pysyncobj's serializer, with the membership at the dump's index (its last entry
        is the applied one): pysyncobj writes the members as they are now, changes in the
        log past the dump included (which a cut may undo after the dump is written), and
        this node among them, a node started to join and not yet added too (tick thread)."""
        self._dump.start(tmp_path, (raft_data[0], raft_data[1], set(self._applied_members)))

    def _membership_applied(self, change: list) -> None:  # tick thread
        node = change[2] if len(change) >= 3 else DialNode(change[1])
        if change[0] == "add":
            self._applied_members.add(node)
        elif change[0] == "rem":
            self._applied_members.discard(node)

    def _dump_loaded(self) -> None:  # tick thread
        self._tail_to_take = False
        # pysyncobj dropped the links of members the dump's membership lacks, untold
        # (forget_link). A leader linked to from outside the membership keeps its link
        # (_link_named_leader): a dump taken before its add lacks it, and the add past the
        # dump keeps the live link, which would count as down until it dropped.
        kept = self.otherNodes | self.readonly_nodes
        if self._named_leader is not None:
            kept = kept | {self._named_leader}
        self.connected_nodes = self.connected_nodes & kept
        self._take_membership_of_log(self.raftLastApplied + 1)  # the dump's index, just loaded

    def _take_membership_of_log(self, first: int) -> None:
        """The changes in the log from ``first`` on (past the dump just loaded, or the whole
        journal at the first tick of a node that had no dump) are this node's membership
        now (Raft's rule), taken in order over the dump's or the configured one; pysyncobj
        would take each only once it applies it (which the seam makes a no-op)."""
        for command, _index, _term in self._get_entries(first):
            change = self.membership_change_of(command)
            if change is not None:
                self.take_membership_change(change)

    def _membership_changed(self, change: list, reverse: bool) -> None:  # tick thread
        kind, address = change[0], change[1]
        self._voter = self_after(change, self.settings.raft, reverse, self._voter)
        if (kind == "rem") != reverse and address != self.settings.raft:
            self._peer_clocks.pop(address, None)  # its clock no longer counts for the quorum's
            self._acked_sent.pop(address, None)
            self._refused.pop(address, None)
            self._stepped_back.pop(address, None)
            node = change[2] if len(change) >= 3 else DialNode(address)
            self.serializer.forget(node)
            self.connected_nodes = self.connected_nodes - {node}  # dropNode does not say (forget_link)
        log.info("membership: %s %s%s", "undid" if reverse else "took", kind, f" {address}")

    def _may_change_membership(self) -> bool:
        """No change while another is in the log uncommitted (pysyncobj's intent)."""
        return self._membership_settled()

    def _membership_settled(self) -> bool:
        """No change of the membership in the log above the commit index (a new leader may
        cut one that is), looked at on every tick (the status) at the cost of the entries
        appended since the last. The last change seen is kept,
        and the log is looked at again above the commit index once the entry last looked
        at changed its term (a leader's appends replaced it) or is gone."""
        seen, term = self._changes_seen
        last = self.last_log_index()
        rewritten = seen > 0 and (seen > last or self.entry_term(seen) != term)
        if rewritten:
            self._last_change = 0
        first = max(0 if rewritten else seen, self.raftCommitIndex) + 1
        for command, index, _term in self._get_entries(first) if first <= last else ():
            if self.membership_change_of(command) is not None:
                self._last_change = index
        if rewritten or first <= last:
            self._changes_seen = (last, self.entry_term(last))
        return self._last_change <= self.raftCommitIndex

    def add_member(
        self, member: Member, dial: str | None, catch_up_s: float, applied: tuple[int, int] | None = None
    ) -> Awaitable[None]:
        """On the loop, on the master: feed ``member`` the log as a learner until it holds
        and applied it up to the commit index of now, then commit the change that adds it;
        ``applied`` is the (index, term) it says it applied (its ``/readyz``). Raises
        :class:`MembershipChangeError` when it cannot (``code`` says why)."""
        node = DialNode(member.raft, dial, member.node_id, member.http)
        return self._awaited(lambda settle: self.change_membership("add", node, catch_up_s, settle, applied))

    def remove_member(self, raft: str) -> Awaitable[None]:
        """On the loop, on the master: commit the change that removes the member at ``raft``."""
        return self._awaited(lambda settle: self.change_membership("rem", DialNode(raft), 0.0, settle))

    @staticmethod
    def _awaited(ask: Callable[[Callable], None]) -> Awaitable[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ask(lambda why: settle(fut, None, None if why is None else MembershipChangeError(why[1], why[0])))
        return fut

    def change_membership(
        self,
        kind: str,
        node: DialNode,
        catch_up_s: float,
        settle: Callable[[tuple[str, str] | None], None],
        applied: tuple[int, int] | None = None,
    ) -> None:
        """On the loop: ask for a change (``kind`` ``"add"`` or ``"rem"``) of ``node``;
        ``settle(why)`` runs on the loop once it is made (None) or not ((code, message))."""

        def settled(why: tuple[str, str] | None, status: RaftStatus) -> None:  # on the loop
            self.status = status  # the membership an answer shows is the one made
            settle(why)

        def done(why: tuple[str, str] | None) -> None:  # tick thread
            self._crossing.post(settled, why, self._status_to_post())

        self._membership_asks.put((kind, node, catch_up_s, done, applied))
        self.wake_tick_thread()

    def _tick_membership(self) -> None:
        """Start the changes asked for, and drive a catch-up under way (tick thread)."""
        if self._tail_to_take:  # the first tick of a node that had no dump to load
            # From the journal's start: this tick may have applied committed entries already.
            self._take_membership_of_log(self._journal[0][1] if len(self._journal) else 1)
            self._tail_to_take = False
        self._membership_taken = True  # only once the take above went through
        while True:
            try:
                kind, node, catch_up_s, done, applied = self._membership_asks.get_nowait()
            except queue.Empty:
                break
            self._start_change(kind, node, catch_up_s, done, applied)
        if self._removing is not None and not self._isLeader():
            # pysyncobj answers once this node applies the entry as a follower, and never
            # if a snapshot is installed past it
            self._removing(("not_committed", PROPOSED_THEN_LOST))
        joining = self._joining
        if joining is None:
            return
        if not self._isLeader():
            why = "this node stopped being the master during the catch-up"
            if joining.proposed:  # its answer may never come: a snapshot installed past it
                why = PROPOSED_THEN_LOST
            self._end_join(("lost_lead" if not joining.proposed else "not_committed", why), joining)
            return
        if joining.proposed:
            return
        if not joining.fed:
            if (self._dump.index or 0) > joining.dump_after:
                self._feed(joining)
            elif monotonic_time() > joining.deadline:
                self._end_join(
                    (
                        "catch_up_failed",
                        f"no dump to feed {joining.node.node_id} from was written in time "
                        f"(the last at index {joining.dump_after}): is this master halted?",
                    ),
                    joining,
                )
            return
        match = self.match_index.get(joining.node, 0)
        if match >= joining.target and joining.applied_target():
            if joining.another_round(self.raftCommitIndex, monotonic_time(), self.settings.raft_max_timeout):
                return
            # Its clock read too, for the quorum clock to count it at once; a node whose
            # keep-alives give no reading is added all the same after a few keep-alives.
            joining.ready_at = joining.ready_at or monotonic_time()
            waited = monotonic_time() - joining.ready_at
            if (
                not self._clock_fresh(joining.node)
                and waited < CLOCK_WAIT_KEEPALIVES * self.settings.link_keepalive_s
            ):
                return
            joining.proposed = True
            answered = self._change_answered(lambda why, joining=joining: self._end_join(why, joining))
            self.addNodeToCluster(joining.node, callback=answered)
        elif monotonic_time() > joining.deadline:
            where = f"held the log only up to {match} of {joining.target}"
            if match >= joining.target:
                where = f"held the log up to {joining.target} but had applied it only up to {joining.applied}"
            self._end_join(
                (
                    "catch_up_failed",
                    f"{joining.node.node_id} {where} when the time to catch up ran out: is it "
                    f"running, started to join, with this cluster's secret, and reachable from "
                    f"this node at {joining.node.address}?",
                ),
                joining,
            )

    def _start_change(  # tick thread
        self, kind: str, node: DialNode, catch_up_s: float, done, applied: tuple[int, int] | None
    ) -> None:
        if not self._isLeader():
            done(("not_master", "this node is not the master"))
            return
        if self._joining is not None:
            done(("change_under_way", f"{self._joining.node.node_id} is being added"))
            return
        members = self.otherNodes
        if kind == "rem":
            member = next((n for n in members if n == node), None)
            if member is None:
                done(("not_a_member", f"no member at {node.address}"))
                return
            self._propose_removal(member, done)
            return
        if node == self._self_node or node in members:
            done(("member_exists", f"{node.address} is a member already"))
            return
        deadline = monotonic_time() + catch_up_s
        joining = self._joining = Joining(
            node, self.raftCommitIndex, deadline, monotonic_time(), done, dump_after=self._dump.index or 0
        )
        # What the joiner applied counts only as an entry of this log, of the same term
        # (a backup of another history, one a whole-cluster restore left, may share indexes).
        ours = applied is not None and self.entry_term(applied[0]) == applied[1]
        if needs_fresh_dump(joining.dump_after, joining.target, applied[0] if ours else 0):
            log.info(
                "membership: a dump first, to feed %s from (the last at index %d, committed %d)",
                node.node_id,
                joining.dump_after,
                joining.target,
            )
            self._ask_for_dump()
        else:
            self._feed(joining)

    def _propose_removal(self, member, done) -> None:  # tick thread
        """Propose the removal of ``member``; ``done`` once: at pysyncobj's answer, or when
        this node stops leading first (``_tick_membership``)."""

        def answer(why: tuple[str, str] | None) -> None:
            if self._removing is answer:
                self._removing = None
                done(why)

        self._removing = answer
        self.removeNodeFromCluster(member, callback=self._change_answered(answer))

    def _feed(self, joining: Joining) -> None:  # tick thread
        node = joining.node
        self.feed_learner(node)
        joining.fed = True
        log.info("membership: feeding %s (%s) up to index %d", node.node_id, node.address, joining.target)

    def _end_join(self, why: tuple[str, str] | None, joining: Joining) -> None:  # tick thread
        if self._joining is not joining:
            return  # ended already (its answer came after the lead was lost)
        self._joining = None
        if why is not None:
            self.drop_learner(joining.node)
            if joining.node not in self.otherNodes:  # not proposed, or cut: no member's clock
                self._peer_clocks.pop(joining.node.address, None)
        joining.done(why)  # after the learner is gone: the status it posts shows the change

    @staticmethod
    def _change_answered(done):
        """pysyncobj's callback for a change: SUCCESS once committed, else why not."""

        def answered(_res, err) -> None:  # tick thread
            if err == FAIL_REASON.SUCCESS:
                done(None)
            elif err == FAIL_REASON.REQUEST_DENIED:
                done(
                    (
                        "change_refused",
                        "another change of the membership is uncommitted, or this master "
                        "has not yet committed an entry of its term: try again",
                    )
                )
            else:
                done(("not_committed", f"the change was not committed (pysyncobj reason {err})"))

        return answered

    # -- handover -------------------------------------------------------------

    async def transfer_leadership_to(self, target: str | None, deadline_s: float) -> bool:
        """Ask for a transfer from the tick thread, retrying while it is denied; True once
        this node stepped down."""
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def done(ok: bool) -> None:  # tick thread
            self._crossing.post(lambda: fut.done() or fut.set_result(ok))

        self._transfer = (target, time.monotonic() + deadline_s, done)
        self.wake_tick_thread()
        return await fut

    def _tick_transfer(self) -> None:
        pending = self._transfer
        if pending is None:
            return
        target, deadline, done = pending
        if not self._isLeader():
            self._transfer = None
            self._hold_back_from_elections()
            done(True)
            return
        if time.monotonic() > deadline:
            self._transfer = None
            done(False)
            return

        def answer(_res, err) -> None:
            if err not in (FAIL_REASON.SUCCESS, FAIL_REASON.REQUEST_DENIED):
                log.warning("transfer of leadership failed: reason %s", err)

        self.transferLeadership(target, callback=answer)

    def _tick_voter(self) -> None:
        """A node outside the membership in its log (started to join, or removed) stands
        for no election: its deadline is kept ahead of it (tick thread)."""
        if not self._voter and not self._isLeader():
            self.election_deadline = monotonic_time() + self.settings.raft_max_timeout

    def _tick_halted(self) -> None:
        """A halted replica leads nothing: it hands leadership over and never campaigns.

        It still stores and acknowledges entries (its journal is durable), so it counts for
        commits, and a restart replays what it could not apply.
        """
        if not self.state.halted:
            return
        self._hold_back_from_elections()
        now = monotonic_time()
        if self._isLeader() and now >= self._next_halted_transfer:
            self._next_halted_transfer = now + 0.2
            log.warning("halted: handing leadership over (%s)", self.state.halted)
            self.transferLeadership(None)

    def _commit_told_within(self) -> float:
        """A leader's new commit index travels with its next append: a proposal's, sent at
        once, or one due ``commit_told_within_s`` after the apply (a tick), rather than in
        an append of its own after each apply. Followers apply that much later."""
        within = self.settings.commit_told_within_s
        return self.settings.tick_s if within is None else within

    def _tick_wait(self, longest: float) -> float:
        """The tick thread's wait for a message: ``tick_s`` while work goes on over ticks
        (entries to apply, proposals, a catch-up, a shipment, a transfer, a peer unlinked,
        a halt, an election); else up to this node's next timed step, a leader's next
        append (a heartbeat, or its new commit index: :meth:`_commit_told_within`) or a
        follower's election deadline, and at most ``longest`` (``idle_tick_s``). Each
        follower so wakes at its own deadline, not on a shared grid, and an idle node
        ticks 25-50 times a second rather than 200."""
        tick = self.settings.tick_s
        leader = self._isLeader()
        if (
            self.raftCommitIndex > self.raftLastApplied
            or self.proposals_waiting()
            or self._transfer is not None
            or self._joining is not None
            or self.serializer.in_flight()
            or self.state.halted is not None
            or self.is_candidate()
            or len(self.linked_peers()) < len(self.otherNodes | self.readonly_nodes)
            or (leader and min(self.match_index.values(), default=0) < self.last_log_index())
        ):
            return tick
        left = (self.next_append_at() if leader else self.election_deadline) - monotonic_time()
        return min(longest, left) if left > 0 else tick

    def _may_compact(self) -> bool:
        """Compaction, also when the log's commands pass ``log_compaction_bytes``.

        The log is on disk (journal.py): the budget bounds the journal file and what
        a restart replays, no longer memory.

        No snapshot while halted: it would be labelled with entries the store never applied,
        and compaction would then drop them from the journal that a restart replays."""
        if self.state.halted:
            return False
        # Not while a shipment is under way: a dump and cut now would leave the follower
        # to continue from entries the leader no longer holds, and it would be shipped a
        # snapshot again, and again under sustained ingest. The log waits on disk.
        if self.serializer.in_flight():
            return False
        # Not while a finished dump awaits pysyncobj: it is about to cut the log, and a flag
        # set now would outlive the cut and ask for a second dump at once.
        if self._journal.bytes > self.settings.log_compaction_bytes and not self._dump.finished:
            self.forceLogCompaction()
        return True

    def _hold_back_from_elections(self) -> None:
        """Keep a master that just handed over from standing for election for a while.

        Its election deadline went stale while it led; unless a vote resets it, it would
        call an election at once and could unseat the node it just handed over to (DESIGN
        §5: "hold the old node back"). pysyncobj has no API for this: the deadline is set
        through the seam (``election_deadline``), on the tick thread that owns it.
        """
        self.election_deadline = monotonic_time() + self.settings.hold_back_s

    # -- snapshots: a manifest of the store (dump_file.py), shipped on the fly ----

    def _read_snapshot(self, filename: str):
        """pysyncobj's deserializer (tick thread): our own dump at start, or one the leader
        shipped. Either way the store ends at least at the dump's index.

        pysyncobj logs and forgets whatever a deserializer raises, then goes on: at start a
        node that can never apply, on a follower an install answered as a success. Any
        failure here halts the replica instead, with the reason (``/readyz``, the log), and
        the follower's next success answer, which would report the failed install as done,
        is not sent (``_answer_leader``).
        """
        try:
            incoming = self._dump.incoming_path
            if os.path.exists(incoming):  # a shipped dump, received whole (snapshot_stream.py)
                local, raft_data = None, self._install_shipped(incoming)
            else:  # None: ``filename`` holds a dump a previous version received in its place
                local = self._dump.current()
                raft_data = self._load_own(local) if local is not None else self._install_shipped(filename)
            self._finish_cut(raft_data)
            raft_data = self._with_membership(raft_data)
        except Exception as e:
            why = f"cannot load the Raft dump {filename}: {e!r}"
            log.critical("%s: halting this replica", why)
            self._halt(why)
            self._refuse_success = True
            raise
        if local is None:
            self._installed_at = raft_data[0][1]
            # The install took as long as the store's size; the leader's heartbeats wait
            # unread meanwhile, and the next tick would find the election deadline gone.
            self.election_deadline = monotonic_time() + self.random_election_timeout()
        return raft_data

    def _with_membership(self, raft_data):
        """The dump's data, its membership made this node's: whether it votes, and where it
        dials the others. A dump without one (``horologe restore`` writes none: the backup's
        addresses are another cluster's) keeps the membership this node was started with."""
        last, before, cluster = raft_data[0], raft_data[1], raft_data[2]
        if not cluster:
            cluster = self._configured_cluster()
        self._voter = any(n.address == self.settings.raft for n in cluster)
        configured = self._configured
        dialled = {
            DialNode(n.address, configured[n.address].dial, n.node_id, n.http)
            if n.address in configured
            else n
            for n in cluster
        }
        self._applied_members = set(dialled)
        return (last, before, dialled, *raft_data[3:])

    def _load_own(self, local: LocalDump):
        store: Storage = self.state.store
        try:
            check_not_behind(local, store.applied_index, store.directory)
        except StoreBehindDumpError as e:
            self._halt(str(e))
        return local.raft_data

    def _install_shipped(self, filename: str):
        """Install a dump the leader shipped: its store replaces this one unless this one
        already holds the same history at least as far (same last index and term, or past
        it: a follower applies only committed entries, which every later leader holds)."""
        store: Storage = self.state.store
        staging = self._dump.dump_path + ".restore"  # removed at start if a stop leaves it
        raft_data = read_shipped(filename, staging)
        src = os.path.join(staging, "store")
        probe = CommitJournal(src, 1 << 30)
        probe.open(read_only=True)
        shipped = (probe.state.applied_index, probe.state.meta.get("applied_term"))
        probe.close()
        held = (store.applied_index, store.meta("applied_term"))
        if shipped[0] > held[0] or (shipped[0] == held[0] and shipped != held):
            log.info("installing snapshot at index %d (term %s)", *shipped)
            store.restore(src)
            self.state.cache.clear()
            self._publish(None)
        elif (own := self._newer_own_dump(raft_data)) is not None:
            log.info(
                "a snapshot at index %d was shipped to this node, whose own dump is at %d: its own kept",
                raft_data[0][1],
                own[0][1],
            )
            raft_data = own
        shutil.rmtree(staging, ignore_errors=True)
        # The shipped file holds the whole store: keep only a manifest of it.
        self._dump.replace(LocalDump(store.applied_index, raft_data, store.checkpoint_record()))
        return raft_data

    def _newer_own_dump(self, shipped_raft_data):
        """This node's own dump's raft data, if that dump ends past the shipped one and the
        journal begins with its last two entries; else None. A stale reset can ship a
        follower a snapshot older than its own; its own then holds the same history further
        (a dump covers applied, so committed, entries), and pysyncobj, loading the shipped
        one, would clear a journal that does not hold the shipped dump's entries, dropping
        entries the follower acknowledged."""
        own = self._dump.current()
        if own is None or own.raft_data[0][1] <= shipped_raft_data[0][1]:
            return None
        return own.raft_data if self._journal_holds(own.raft_data) else None

    def _journal_holds(self, raft_data) -> bool:
        """Whether the journal holds the dump's last two entries (same index, same term:
        the same entries, by Log Matching), so the leader's log up to the dump."""
        last, before = raft_data[0], raft_data[1]  # (command, index, term) each
        journal = self._journal
        return journal.term_at(before[1]) == before[2] and journal.term_at(last[1]) == last[2]

    def _clears_journal_on_load(self, after_install: bool) -> bool:
        """Never. pysyncobj loads a dump at start and after an install (``after_install``),
        and then keeps the journal only if it begins with the dump's last two entries, and
        never after an install. :meth:`_finish_cut` has cut a journal that
        holds those entries to begin with them, so it is kept in both cases: after an
        install, entries the follower had acknowledged past the snapshot stay (a stale
        reset can make a leader ship a snapshot to a follower already past it)."""
        return False

    def _finish_cut(self, raft_data) -> None:
        """Cut the journal to begin with the dump's last two entries, if it holds them.

        At start, this finishes a compaction that a crash interrupted: pysyncobj renames a
        dump into place on one tick and cuts the journal on the next. After an install, it
        keeps what the follower holds past the snapshot. A journal that does not hold
        those two entries (:meth:`_journal_holds`) is left to pysyncobj's clear.
        """
        if not self._journal_holds(raft_data):
            return
        last, before = raft_data[0], raft_data[1]  # (command, index, term) each
        journal = self._journal
        first = journal[0][1]
        if before[1] > first:
            # At start: a compaction that a stop interrupted (chaos_tests: power_loss_at_dump).
            log.warning(
                "finishing the journal cut at index %d (the dump's); keeping entries %d..%d after it",
                before[1],
                last[1] + 1,
                journal.last_idx,
            )
            journal.deleteEntriesTo(before[1] - first)

    def _ask_for_dump(self) -> None:  # tick thread
        self.forceLogCompaction()

    def _followers_held_back(self) -> frozenset:
        """The followers left out of this tick's sends: those whose snapshot shipment waits
        (its connection's write buffer is full, or for a newer dump: snapshot_stream.py)."""
        held_back = self.serializer.held_back
        return frozenset(n for n in self.connected_nodes if held_back(n, self.send_backlog))
