"""One node: storage, state machine, Raft, wheel driver, group commit, consumers and handover, wired together.

The HTTP edge (node/http/) calls only this. The writer (store and state machine) belongs
to pysyncobj's tick thread; this service, on the event loop, reads the committed view
that the tick thread publishes after each apply (cluster/raft/loop_crossing.py has the
rule). It is the one place that stamps entries with the watermark and clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable

import numpy as np

from horologe.cluster import (
    CANCEL,
    MOVE,
    PRODUCE,
    RELEASE,
    SYNC,
    TRIM,
    ApplyResult,
    Entry,
    EntryKind,
    NotMasterError,
    Peer,
    StateMachine,
    all_committed,
)
from horologe.cluster.apply_messages import targets_of
from horologe.cluster.committed_reads import GONE
from horologe.cluster.entries import SUBSCRIBE
from horologe.cluster.push_state import every as every_subscription
from horologe.cluster.raft.loop_crossing import LoopCrossing
from horologe.cluster.raft.membership import Member
from horologe.cluster.raft.node import Applied, RaftNode
from horologe.cluster.retention import Cut
from horologe.storage import (
    CorruptLogError,
    MessageColumns,
    MessageExpiredError,
    MessageId,
    Storage,
    StorageConfig,
    UnknownMessageError,
    id_strings,
)
from horologe.storage.store_reader import StoreReader

from .backups import Backups
from .clock import Clock
from .committed_view import CommittedView
from .config import NodeConfig
from .consumers.dead_letters import DeadLetters
from .consumers.receipts import Receipts
from .consumers.service import Consumers
from .errors import ApplyFailed, EntryTooLarge
from .group_commit import MAX_ENTRY_BYTES, MAX_ITEMS_BYTES, GroupCommit
from .handover import Handover
from .master_hold import MasterHold
from .membership import Membership
from .observers import NO_OBSERVERS, Observers
from .peer_readiness import readiness_at
from .push.allow import PushAllow
from .push.client import PushHttp
from .push.subscriptions import Subscriptions
from .push.worker import PushWorker
from .quorum_clock import QuorumClock, majority
from .retention_driver import RetentionDriver
from .schedules.service import Schedules
from .store_damage import StoreDamage
from .tls import peer_context
from .wheel_driver import WheelDriver, WheelSettings

log = logging.getLogger(__name__)

# Why a node that is no voting member knows no master: a removed node started again, or one
# started to join and not yet added, hears from none.
OUTSIDE = (
    "not the master, and knows none: this node is not a voting member (removed, or not yet added); "
    "ask a member"
)


def _entry_parts(cols: MessageColumns) -> list[tuple[MessageColumns, int]]:
    """``cols`` cut into runs of at most ``MAX_ITEMS_BYTES`` (one message at least), each
    with its size by ``MessageColumns.wire_sizes``."""
    sizes = cols.wire_sizes()
    total = int(sizes.sum())
    if total <= MAX_ITEMS_BYTES:
        return [(cols, total)]
    parts: list[tuple[MessageColumns, int]] = []
    lo, size = 0, 0
    for i, n in enumerate(sizes.tolist()):
        if i > lo and size + n > MAX_ITEMS_BYTES:
            parts.append((cols.part(lo, i), size))
            lo, size = i, 0
        size += n
    return [*parts, (cols.part(lo, len(cols)), size)]


class NodeService:
    def __init__(
        self,
        config: NodeConfig,
        clock: Clock,
        observers: Observers = NO_OBSERVERS,
        storage_config: StorageConfig | None = None,
        make_raft: Callable[..., RaftNode] = RaftNode,
        peer_readiness: Callable[[str, float], Awaitable[dict | None]] | None = None,
        push_http: Callable[[], PushHttp] | None = None,
    ) -> None:
        """``observers``: what Raft, the wheel's deliveries and the consumers report to
        the metrics (node/observers.py). ``storage_config``: the store's layout (default:
        ``fsync`` and ``recent_records_mb`` of the config). ``make_raft``: called as ``RaftNode`` is,
        on the loop, at :meth:`start`; the simulator (sim/) passes one that ticks the
        node itself, on its network and crossing. ``peer_readiness(url, timeout_s)``: a
        peer's ``/readyz`` body or None (default: over HTTP, node/peer_readiness.py).
        ``push_http``: makes the pool the push worker sends through while this node leads
        (default: node/push/client.py's)."""
        self.config = config
        self._make_raft = make_raft
        self._observers = observers
        self.own_clock = clock
        # Calls to peers' HTTP API (readiness, forwarded requests) verify their certificates
        # against tls_ca, else the system's CAs (node/tls.py): one context, as loading CAs
        # costs ~45 ms of CPU.
        self.peer_ssl = peer_ssl = peer_context(config.tls_ca)
        self._readiness = peer_readiness or (lambda url, timeout_s: readiness_at(url, peer_ssl, timeout_s))
        self.quorum_clock = QuorumClock(
            clock, self._peer_clocks, lambda: len(self.voters()), config.clock_tolerance_ms
        )
        # Every entry, deadline and relative delay is taken by the quorum-bounded clock.
        self.clock = self.quorum_clock.now_ms
        store = Storage(
            os.path.join(config.data_dir, "store"),
            storage_config
            or StorageConfig(fsync=config.fsync, recent_records_bytes=config.recent_records_mb << 20),
        )
        for line in store.recovered:
            log.warning("storage recovery: %s", line)
        self.limits = store.config.limits
        # The writer: handed to the tick thread at start, never used here again.
        self._writer = StateMachine(store)
        self.view = CommittedView(StoreReader(store.directory, store.config, store.published()))
        # A read here that meets damaged files halts this replica (store_damage.py).
        self.damage = StoreDamage(
            lambda why, generation: self.raft.halt_damaged(why, generation),
            lambda: self.view.reads.generation,
        )
        self.driver = WheelDriver(
            self.view.reads,
            lambda: self.view.ws,
            lambda now: self.submit(SYNC, clock_ms=now),
            self.clock,
            WheelSettings(
                config.fire_batch_limit,
                config.sync_interval_ms,
                config.node_id,
                lead_ms=config.fire_lead_ms,
                lead_max_ms=config.fire_lead_max_ms,
            ),
            clock_known=self.quorum_clock.known,
            each_turn=self._check_clock,
            damaged=self.damage.seen,
        )
        self.produce_commit = GroupCommit(
            self._propose_produce,
            config.batch_window_ms,
            lambda cols: int(cols.wire_sizes().sum()),
            MessageColumns.concat,
        )
        self.consumers = Consumers(
            self.view,
            self.propose,
            self.clock,
            config.retry_levels_ms,
            config.ack_window_ms,
            Receipts(config.cluster_secret),
            observers.handout_lateness,
            self.require_master,
            self.require_leading,
        )
        self.dead_letters = DeadLetters(
            self.view,
            self.produce,
            self.consumers.ack,
            self.consumers.receipts,
            self.clock,
            self.consumers.held_positions,
            self.consumers.held_meanwhile,
        )
        self.retention = RetentionDriver(
            self.view.reads,
            self._propose_cut,
            self.clock,
            config.retention_ms,
            config.retention_check_ms,
            self._may_lead,
            damaged=self.damage.seen,
        )
        self.schedules = Schedules(
            self.view,
            self.propose,
            self.clock,
            config.schedule_horizon_ms,
            config.schedule_check_ms,
            self._may_lead,
        )
        self.push = PushWorker(
            lambda: every_subscription(self.view.reads.meta),
            lambda: self.propose(SYNC),
            self.consumers.pull,
            self.consumers.ack,
            self.consumers.nack,
            self.consumers.give_back,
            self.clock,
            PushAllow(config.push_allow),
            damaged=self.damage.seen,
            **({} if push_http is None else {"http": push_http}),
        )
        self.subscriptions = Subscriptions(self.view, self.propose, self.push)
        # What the master alone runs: started on becoming master, cancelled on stepping down.
        self._leading = (self.driver, self.push, self.retention, self.schedules.driver)
        self.raft: RaftNode | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task] = []
        self.handover = Handover(
            config,
            self._readiness,
            require_master=self.require_master,
            is_master=self.is_master,
            leader_id=self.leader_id,
            linked_peer_ids=self.linked_peer_ids,
            peers=self.peers,
            propose=self.propose,
            transfer=lambda target, deadline_s: self.raft.transfer_leadership_to(target, deadline_s),
            pause_leading=self._pause_leading,
            resume_leading=self._resume_leading,
            settle_leading=self.push.drain,
        )
        # The master check of the routes holds a request while this master may not serve
        # for a moment, up to the election timeout (node/master_hold.py).
        election_timeout_s = config.cluster_settings().raft_min_timeout
        self.hold = MasterHold(self.require_master, self.is_master, election_timeout_s)
        self.membership = Membership(
            require_master=self.require_master,
            members=self.members,
            settled=lambda: self.raft is None or self.raft.status.members_settled,
            linked=lambda: self.raft.status.linked,
            shipping=lambda: self.raft.status.shipping,
            own_raft=config.raft,
            add=lambda member, catch_up_s, applied: self.raft.add_member(
                member, config.dial_of(member.raft), catch_up_s, applied
            ),
            remove=lambda raft: self.raft.remove_member(raft),
            readiness=lambda http: self._readiness(config.http_url(http), 2.0),
        )

        self.backups = Backups(
            config.node_id,
            lambda name: self.raft.take_backup(name),
            self.own_clock,
            halted=lambda: self.view.halted,
            behind=self._why_behind,
        )

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.raft = self._make_raft(
            self.config.cluster_settings(),
            self._writer,
            LoopCrossing(self._loop),
            self._on_applied,
            self._on_role,
            clock=self.own_clock,
            observe_apply=self._observers.apply_seconds,
            observe_fsync=self._observers.journal_fsync_seconds,
        )
        self._tasks = [asyncio.create_task(t.run()) for t in (self.produce_commit, self.consumers)]

    async def stop(self) -> None:
        await self.handover.close()
        for task in self._leading:
            await task.close()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        if self.raft is not None:
            await asyncio.to_thread(self.raft.destroy_synchronous)  # the tick thread is gone after
        self.view.close()
        self._writer.store.close()

    def _on_applied(self, applied: Applied) -> None:  # via the crossing, in apply order
        self.view.follow(applied, keep_written=self.is_master())  # only a master's pulls read them
        if applied.halted:
            for task in self._leading:  # a halted replica proposes nothing (cluster/raft/node.py)
                task.cancel()  # and hands over
        res = applied.result
        if res is None:
            return
        if len(res.pending_slots):
            self.driver.on_append(res.pending_slots)
        if res.kind == SYNC:
            self.handover.sync_applied()
        if res.leases_paused:
            self.consumers.pause_leases()
        if res.delivered:
            self.consumers.notify()
        if res.kind == SUBSCRIBE:
            self.push.refresh()
        if len(res.wheel_lateness_ms):
            self._observers.ready_lateness(res.wheel_lateness_ms / 1000)

    def _on_role(self, leads: bool) -> None:  # via the crossing, when this node starts or stops leading
        self.consumers.forget_leases()  # leases of another term mean nothing now
        if not leads:
            self.view.reads.forget_written()
        for task in self._leading:
            if leads and not self.handover.releasing and not self.view.halted:
                task.start()
            elif not leads:
                task.cancel()

    def _peer_clocks(self) -> list[tuple[int, float]]:
        return [] if self.raft is None else self.raft.peer_clocks()

    def _check_clock(self) -> None:
        """Each wheel turn: hand the wheel over if this clock strays from the quorum's."""
        offset = self.quorum_clock.offset_ms()
        if offset is not None and abs(offset) > self.quorum_clock.tolerance_ms:
            self.handover.for_clock(offset, self.quorum_clock.tolerance_ms)

    async def _pause_leading(self) -> None:
        """For a release: push stops at once (drained before, unless it was started again
        since: its acks would be refused now, and the next master sends what is unacked),
        and the wheel is let go of."""
        self.push.cancel()
        await self.driver.stop()

    def _resume_leading(self) -> None:
        """A release that failed: this node still leads, and runs what the master runs (a
        role change during the release started none of it: it was releasing)."""
        for task in self._leading:
            task.start()

    # -- roles ------------------------------------------------------------------

    def is_master(self) -> bool:
        """Whether this node leads, as the tick thread last published (cluster/raft/status.py)."""
        return self.raft is not None and self.raft.status.is_master

    def leader_http(self) -> str | None:
        """The master's HTTP API as a URL (a 307 names it), its scheme kept."""
        member = self.member_at(self.raft.status.leader)
        return None if member is None else self.config.http_url(member.http)

    def leader_id(self) -> str | None:
        member = self.member_at(self.raft.status.leader)
        return None if member is None else member.node_id

    # -- the membership (cluster/raft/membership.py) ---------------------------------

    def members(self) -> tuple[Member, ...]:
        """The membership in this node's Raft log, itself first; the one it was started
        with until Raft publishes one."""
        members = () if self.raft is None else self.raft.status.members
        if members:
            return members
        config = self.config
        own = Member(config.node_id, config.raft, config.http, voter=not config.join)
        return (own, *(Member(p.node_id, p.raft, p.http) for p in config.peers))

    def voters(self) -> tuple[Member, ...]:
        """The members that vote: the cluster whose majorities count."""
        return tuple(m for m in self.members() if m.voter)

    def peers(self) -> tuple[Peer, ...]:
        """The other voting members."""
        config = self.config
        return tuple(
            Peer(m.node_id, m.raft, m.http, config.dial_of(m.raft))
            for m in self.voters()
            if m.raft != config.raft
        )

    def member_at(self, raft: str | None) -> Member | None:
        return next((m for m in self.members() if m.raft == raft), None)

    def leader_changes(self) -> int:
        """Changes of the leader this node knows, since it started."""
        return 0 if self.raft is None else self.raft.status.leader_changes

    def stale_answers(self) -> int:
        """Followers' answers dropped for naming another term, since this node started."""
        return 0 if self.raft is None else self.raft.status.stale_answers

    def linked_peer_ids(self) -> set[str]:
        """Ids of the peers this node has a live Raft link to."""
        linked = self.raft.status.linked
        return {p.node_id for p in self.peers() if p.raft in linked}

    def readiness(self) -> dict:
        """Ready: a master is known, this node applies, is linked to a quorum and knows its clocks.

        ``links`` names each peer and whether this node has a live Raft link to it;
        ``clock`` whether a majority's clock readings are in and fresh (a master serves
        nothing otherwise). ``node_id``, ``raft`` and ``join`` are this node's config's: a
        master adding a node checks it is the one named, at the Raft address named,
        started to join, with that master's Raft address among its ``peers``; it feeds it
        the log from ``applied_index`` when it holds that entry, of ``applied_term``.
        """
        linked, peers = self.linked_peer_ids(), self.peers()
        clock = self.quorum_clock.fresh()
        halted = self.view.halted
        ready = self._why_behind() is None and not halted and clock  # a voter, a master known, a quorum
        return {
            "ready": ready,
            "leader": self.leader_id(),
            "halted": halted,
            "links": {p.node_id: p.node_id in linked for p in peers},
            "peers": {p.node_id: p.raft for p in peers},
            "clock": clock,
            "node_id": self.config.node_id,
            "raft": self.config.raft,
            "join": self.config.join,
            "applied_index": self.view.applied_index,
            "applied_term": self.view.reads.meta("applied_term") or 0,
        }

    def _is_voter(self) -> bool:
        """Whether this node is a voting member, as its log has the membership."""
        return any(m.raft == self.config.raft for m in self.voters())

    def _why_behind(self) -> str | None:
        """Why this node's copy of the log may be behind what the cluster committed (a
        backup of it then could miss entries), or None: a voting member that knows a
        master and hears a majority."""
        if not self._is_voter():
            return "it is not a voting member (removed, or not yet added)"
        if self.leader_id() is None:
            return "it knows no master"
        linked, peers = self.linked_peer_ids(), self.peers()
        if 1 + len(linked) < majority(1 + len(peers)):
            return f"it hears {len(linked)} of its {len(peers)} peers, no majority"
        return None

    def _may_lead(self) -> bool:
        """Master, not handing over, sure of its clock, applying: may propose on its own."""
        raft = self.raft
        return (
            raft is not None
            and raft.status.is_master
            and not self.handover.releasing
            and self.quorum_clock.known()
            and not self.view.halted
        )

    def require_master(self) -> None:
        if self.handover.releasing:
            raise NotMasterError(None)  # 503: the next master is a moment away; clients retry
        self.require_leading()

    def require_leading(self) -> None:
        """:meth:`require_master`, but a handover under way is no refusal: for an answer
        whose entries committed before it began (a pull's leases), which proposes nothing."""
        if not self.is_master():
            leader = self.leader_http()
            if leader is None and not self._is_voter():
                raise NotMasterError(None, OUTSIDE)
            raise NotMasterError(leader)
        if not self.raft.lease_held():
            # No majority heard this master within the election timeout: another may have
            # been elected meanwhile (cut off from it, or paused), so it serves nothing until
            # one hears it again (cluster/raft/node.py, the read lease): 503, clients retry.
            raise NotMasterError(None)
        if not self.quorum_clock.fresh():
            # 503 for the moment until a majority's clock readings are in, and while they are
            # stale (a peer just back, a link just healed): time held since then lags the
            # true time, and a lease stamped by it would end early (node/quorum_clock.py).
            raise NotMasterError(None)
        if not self._applied_own_term():
            # A new master knows its log holds every committed entry, but not which of them
            # are committed until an entry of its own term is (its wheel's barrier): before
            # that it may not have applied an ack an old master answered, and a pull would
            # hand the acked message out again (seen in the power_loss chaos scenario). So
            # it serves nothing until it has applied an entry of its term: 503, a moment.
            raise NotMasterError(None)
        if self.view.halted:
            # A halted master hands its place over at once (RaftNode._tick_halted): 503 for
            # the moment, clients retry; /readyz and /admin/status say why it halted.
            raise NotMasterError(None)

    def _applied_own_term(self) -> bool:
        """Whether this node has applied an entry of the term it leads."""
        return self.view.reads.meta("applied_term") == self.raft.status.term

    # -- writes -----------------------------------------------------------------

    async def propose(self, kind: EntryKind, clock_ms: int | None = None, **fields) -> ApplyResult:
        """Stamp an entry with the live watermark and the clock, propose it, and wait until it
        is applied here (and in the view); an apply error is a 500."""
        return await self.submit(kind, clock_ms, **fields)

    def submit(self, kind: EntryKind, clock_ms: int | None = None, **fields) -> Awaitable[ApplyResult]:
        """:meth:`propose`, with the entry stamped and proposed before this returns: the
        wheel proposes its next ``S`` while the last is still being committed."""
        if self.handover.releasing and kind not in (SYNC, RELEASE):
            # Entries proposed now would leave the transfer target behind, and Raft
            # would refuse it the election (field notes: transfer is denied then).
            raise NotMasterError(None)
        if clock_ms is None and not self.quorum_clock.known():
            # An entry's clock is the cluster's time: leases are moved on by the gap before
            # a term's first entry (cluster/leases.py), lateness and retention judged by it.
            # A master that never had a majority's readings knows only its own clock, which
            # may be far off: one stepped an hour ahead stamped its term's first entry so,
            # and every running lease was moved on by the hour (the simulator with --push,
            # seed 950381). It proposes nothing until then: 503, a moment.
            raise NotMasterError(None)
        now = self.clock() if clock_ms is None else clock_ms
        blob = Entry(kind, self.driver.ws, now, **fields).encode()
        if len(blob) > MAX_ENTRY_BYTES:
            # Proposers cut what they send into entries under the cap (group commit, acks,
            # produce parts); this is the backstop. An entry of append_batch_bytes (4 MiB)
            # or more would travel in pysyncobj's "transmission" parts, which skip the
            # append rule (cluster/raft/append_rule.py), and even under that big ones crawl.
            log.error(
                "refused to propose a %s entry of %d bytes (at most %d)", kind, len(blob), MAX_ENTRY_BYTES
            )
            raise EntryTooLarge(
                f"this call makes a Raft entry of {len(blob)} bytes; at most {MAX_ENTRY_BYTES}"
            )
        return self._applied(self.raft.submit(blob))

    @staticmethod
    async def _applied(answer: Awaitable[ApplyResult]) -> ApplyResult:
        res = await answer
        if res.error:
            raise ApplyFailed(res.error)
        return res

    async def _propose_cut(self, cut: Cut) -> ApplyResult:
        return await self.propose(TRIM, hour=cut.hour, ready=sorted(cut.ready.items()))

    async def _propose_produce(self, messages: MessageColumns) -> ApplyResult:
        return await self.propose(PRODUCE, messages=messages)

    async def produce(self, messages: MessageColumns) -> list[str]:
        """Propose messages (each part of a big batch may share a P entry with others); their
        ids, in order. One whose key named a message already there has that message's id.

        A Raft entry stays under ``MAX_ENTRY_BYTES`` (DESIGN §5: commands of a quarter of
        the append batch or more crawl), so a big batch is split across entries. Each part
        commits on its own: if one fails the caller gets the error and, retrying, relies on
        keys for idempotency.
        """
        ids, _ = await self._produce(messages)
        return ids

    async def produce_answered(self, messages: MessageColumns) -> tuple[list[str], list[int]]:
        """:meth:`produce`, with each one's deliver time as a produce answers it: the time
        asked, or for one whose key named a message already there, that message's time as
        the committed view holds it now (moved, if it was rescheduled). The produce is done
        by then: a read that finds the store damaged halts the node, and the time asked is
        answered (an error would tell the client nothing was done, and it would send again)."""
        ids, named = await self._produce(messages)
        times = messages.deliver_at_ms.tolist()
        reads = self.view.reads
        for i in named:
            try:
                place = reads.current_place(MessageId.parse(ids[i]))
                times[i] = reads.read_message(place).message.deliver_at_ms
            except (MessageExpiredError, UnknownMessageError):
                pass  # gone by now
            except CorruptLogError as e:
                self.damage.seen(e)
        return ids, times

    async def _produce(self, messages: MessageColumns) -> tuple[list[str], list[int]]:
        """The ids, and the positions whose key named a message already there."""
        parts = _entry_parts(messages)
        outcomes = await asyncio.gather(
            *(self.produce_commit.submit(p, size) for p, size in parts), return_exceptions=True
        )
        committed = all_committed(outcomes)  # a part dropped beside a committed one: not "nothing done"
        ids: list[str] = []
        named: list[int] = []
        for (res, at), (part, _) in zip(committed, parts, strict=True):
            named += (len(ids) + np.flatnonzero(~res.stored[at : at + len(part)])).tolist()
            ids += id_strings(res.id_hours[at : at + len(part)], res.id_gis[at : at + len(part)])
        return ids, named

    async def cancel(self, ids: list[str], keys: list[tuple[str, str]]) -> list[tuple[str, str | None]]:
        """Cancel by id and by (topic, key): each one's state and the id it names (None: unknown)."""
        res = await self.propose(CANCEL, ids=ids, keys=keys)
        return list(zip(res.cancels, res.cancel_ids, strict=True))

    async def reschedule(
        self, ids: list[str], keys: list[tuple[str, str]], deliver_at_ms: list[int]
    ) -> list[tuple[str, str | None]]:
        """Move messages, by id and by (topic, key), to new times (one per id, then per key):
        each one's state before the move (``scheduled``: moved now) and the id it names."""
        res = await self.propose(MOVE, ids=ids, keys=keys, deliver_at=deliver_at_ms)
        return list(zip(res.cancels, res.cancel_ids, strict=True))

    async def targets(self, ids: list[str], keys: list[tuple[str, str]]) -> list[MessageId | None]:
        """The message each of ``ids`` and then ``keys`` names now, as a reschedule or a
        cancel entry finds them (None: none), found by the writer on its own thread."""
        return await self.raft.ask_writer(lambda store: targets_of(store, ids, keys))

    async def lookup_key(self, topic: str, key: str) -> MessageId | None:
        """The id the key index holds for ``(topic, key)``, found by the writer on its own
        thread (cluster/raft/writer_questions.py); the committed view, when this answers, has
        followed at least the state it was found at."""
        return await self.raft.ask_writer(lambda store: store.lookup_key(topic, key))

    # -- reads ------------------------------------------------------------------

    def admin_status(self) -> dict:
        raft = self.raft.status
        ws = self.view.ws
        counters = self.view.counters()
        applied = self.view.applied_index
        linked = self.linked_peer_ids()
        peers = [
            {
                "node_id": p.node_id,
                "raft": p.raft,
                "http": self.config.http_url(p.http),
                "connected": p.node_id in linked,
            }
            for p in self.peers()
        ]
        return {
            "node_id": self.config.node_id,
            "pid": os.getpid(),
            "role": str(raft.role),
            "leader": self.leader_id(),
            "term": raft.term,
            "commit_index": raft.commit_index,
            "applied_index": applied,
            "raft_log_bytes": raft.log_bytes,
            "snapshot": None if raft.last_dump is None else raft.last_dump._asdict(),
            "wheel": {
                "tick": ws.tick,
                "local_index": ws.to_wire()["local_index"],
                "ms": ws.ms,
                "syncs_led": self.driver.syncs_led,
                "last_sync_led_ms": self.driver.last_sync_led_ms,
            },
            "clock_ms": self.own_clock(),
            "clock_offset_ms": self.quorum_clock.offset_ms(),
            "clock_handovers": self.handover.clock_handovers,
            "pending": counters["stored"] - sum(counters[k] for k in GONE),
            "counters": counters,
            "peers": peers,
            "halted": self.view.halted,
            "skipped_entries": self.view.skipped_entries,
            "retention": {
                "retention_ms": self.config.retention_ms,
                "retained_from_hour": self.view.reads.meta("retained_from_hour", 0),
                "cuts_proposed": self.retention.cuts_proposed,
            },
        }
