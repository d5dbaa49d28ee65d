"""Consumers on the master: pull with leases, ack, nack (retry levels, then the DLQ),
release and extend.

A message leased and not acked within ``visibility_ms`` is handed out again. Leases and
acks are replicated (``A`` entries, group-committed: node/group_commit.py) before they
are answered, so an acked message is never handed out again, and a leased one not before
its lease ends, even by a new master (cluster/leases.py). The master keeps its leases in
memory too (``leases``), taken as it scans, before they commit: a pull that runs
meanwhile passes over them. A new master starts from the committed ones. A group skips
messages its tag filter rejects; those are acked for it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from horologe.cluster import ACK, RETRY, ApplyResult, NotMasterError
from horologe.cluster.consumer_groups import (
    DLQ_PREFIX,
    ORIGIN_HEADER,
    Range,
    merge_ranges,
    ready_logs,
    retry_topic,
    to_ranges,
)
from horologe.cluster.entries import ack_bytes
from horologe.cluster.leases import Lease, LeaseTable, lease_key
from horologe.storage import MessageId, ReadyTrimmedError, UnknownMessageError, tag_signature
from horologe.storage.message import unpack_record

from ..committed_view import CommittedView
from ..errors import CallerGone, InvalidRequest, NotFound, ReceiptExpired
from ..group_commit import MAX_ITEMS_BYTES, GroupCommit
from .receipts import Receipts

log = logging.getLogger(__name__)

HUNG_UP = "the caller hung up before the pull was answered; nothing was leased"
SCAN_CHUNK = 65_536
CURSOR_MS = 10_000  # how long a scan's stopping point is trusted without a lease to bound it
SCAN_LIMIT = 4 * SCAN_CHUNK  # ready entries one pull turn reads (the loop waits meanwhile)
BACKLOG_CHUNK = SCAN_CHUNK  # ready entries a backlog count or a purge reads per turn of the loop
PURGE_CHUNK = 65_536  # positions a purge holds and acks at a time
HELD = 1 << 62  # the lease end of a position while its nack commits: no clock reaches it


@dataclass(frozen=True)
class TagFilter:
    """``"*"`` (or nothing): every message; ``"a||b"``: messages with tag a or b."""

    tags: frozenset[str]

    @classmethod
    def parse(cls, expr: str | None) -> TagFilter:
        if expr is None or expr.strip() in ("", "*"):
            return cls(frozenset())
        tags = frozenset(t.strip() for t in expr.split("||"))
        if "" in tags:
            raise InvalidRequest(f"bad tag expression {expr!r}: want a||b or *", "tags")
        return cls(tags)

    def prefilter(self, sigs: np.ndarray) -> np.ndarray:
        """Bloom prefilter over index signatures: never a false negative (docs/storage.md: tag_sig)."""
        if not self.tags:
            return np.ones(len(sigs), dtype=bool)
        mask = np.zeros(len(sigs), dtype=bool)
        for tag in self.tags:
            want = np.uint64(tag_signature(tag))
            mask |= (sigs & want) == want
        return mask

    def matches(self, tags) -> bool:
        return not self.tags or bool(self.tags.intersection(tags))


class Handed(NamedTuple):
    """One message a pull leased: its delay-log record as stored (decoded only for the
    JSON answer: pull_wire), the receipt, the deliver times of its ready entry, and how
    often it has been handed out (1: this is the first time)."""

    record: bytes | memoryview
    receipt: str
    deliver_at: int
    delivered_at: int
    deliveries: int


@dataclass
class Taken:
    """What a pull's scans leased, as columns (a tuple per message cost a tenth of a pull)."""

    records: list = field(default_factory=list)  # bytes | memoryview each
    deliver_at: list[int] = field(default_factory=list)
    delivered_at: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.records)


@dataclass
class Pulled:
    taken: Taken
    receipts: list[str]  # each message's
    batch_receipts: list[str]  # one per ready log read, naming all it leased there
    deliveries: list[int]  # each message's hand-outs, this one counted (cluster/leases.py)

    @property
    def messages(self) -> list[Handed]:
        t = self.taken
        columns = (t.records, self.receipts, t.deliver_at, t.delivered_at, self.deliveries)
        return [Handed(*m) for m in zip(*columns, strict=True)]


class Consumers:
    """Pulls, acks and nacks on the master, over the committed view.

    ``propose(kind, **fields)`` stamps and proposes an entry; the caller has checked
    that this node is the master. ``require_master()`` raises unless this node still
    serves as master: a waiting pull asks it again each time it wakes, so a pull never
    outlives its master's lead (the leases it would take were forgotten with the role).
    """

    def __init__(
        self,
        view: CommittedView,
        propose: Callable[..., Awaitable[ApplyResult]],
        clock: Callable[[], int],
        retry_levels_ms: tuple[int, ...],
        ack_window_ms: int,
        receipts: Receipts,
        observe_lateness: Callable[[np.ndarray], None] = lambda seconds: None,
        require_master: Callable[[], None] = lambda: None,
        require_leading: Callable[[], None] | None = None,
    ) -> None:
        """``observe_lateness(seconds)``: how late after its deliver_at each message of a
        pulled batch is handed out, one array per batch; ``require_leading()``:
        ``require_master()`` but for a handover under way (default: the same)."""
        self.view = view
        self._observe_lateness = observe_lateness
        self._require_master = require_master
        self._require_leading = require_leading or require_master
        self._propose = propose
        self._clock = clock
        self.receipts = receipts
        self.retry_levels_ms = retry_levels_ms
        self.leases: dict[tuple[str, str], dict[int, int]] = {}  # (group, topic) -> offset -> expiry
        # (group, topic) -> offset -> the token of a lease extended (cluster/leases.py); a
        # lease not extended has its expiry as its token
        self._extended: dict[tuple[str, str], dict[int, int]] = {}
        # (group, topic, tag filter, origin, ahead_ms) -> (where its last scan stopped, until when that holds)
        self._cursors: dict[tuple, tuple[int, int]] = {}
        self._arrived = asyncio.Event()  # replaced after each notify: a fresh one to wait on
        # Named pulls running here, by (group, topic, name): a resend of one waits for it.
        self._named: dict[tuple[str, str, str], asyncio.Future] = {}
        # Acks and leases share entries (an A entry holds both): under load a pull's leases
        # ride with the acks of the batches before it, one entry a round trip. A pull
        # waits for its leases' entry, so a linger (``ack_window_ms``) holds pulls too.
        # Which of an ack and a lease of one message applies first does not matter: an
        # acked message is not handed out, and its lease ends either way.
        self.entry_commit = GroupCommit(self._propose_items, ack_window_ms, ack_bytes)

    async def run(self) -> None:
        """The committer of acks and leases (the node runs it for its life)."""
        await self.entry_commit.run()

    async def _propose_items(self, items: list[tuple]) -> ApplyResult:
        """One A entry of acks (4 fields) and lease items (5 to 7: cluster/leases.py)."""
        acks = [item for item in items if len(item) == 4]
        leases = [item for item in items if len(item) != 4]
        return await self._propose(ACK, acks=acks, leases=leases)

    def notify(self) -> None:
        """Messages became ready (the view already shows them): wake every waiting pull."""
        self._arrived.set()
        self._arrived = asyncio.Event()

    def forget_leases(self) -> None:
        """On a change of role: a new master starts from the committed leases (read when
        it first needs a group's: by then it has applied its predecessor's entries), the
        leases not yet proposed are failed, and every waiting pull wakes to find out
        whether this node still leads."""
        self.leases.clear()
        self._extended.clear()
        self._cursors.clear()
        # Leases and extends taken under the lead that ended, and acks, not proposed yet:
        # never proposed now (node/group_commit.py); their calls answer 503 and are
        # sent again, to the next master.
        self.entry_commit.fail_waiting(NotMasterError(None))
        self.notify()

    def pause_leases(self) -> None:
        """An entry just applied moved committed leases on by a time no master served
        (cluster/leases.py): this master's leases that committed take their new ends and
        keep their tokens (a lease not extended has its expiry as its token). Those still
        committing are left as they are: their entries come after the pause and do not move."""
        lease_now = self._lease_now(self._clock())
        for (group, topic), leases in self.leases.items():
            extended = self._extended.setdefault((group, topic), {})
            # an ended lease was not moved
            for lo, hi, until, token, *_ in self._running(group, topic, lease_now):
                for o in range(lo, hi):
                    held = leases.get(o)
                    if held is not None and held < until and extended.get(o, held) == token:
                        extended[o] = token
                        leases[o] = until

    def _committed(self, group: str, topic: str) -> LeaseTable:
        """The leases of a ready log as the entries applied so far left them."""
        return LeaseTable(self.view.reads.meta(lease_key(group, topic)))

    def _running(self, group: str, topic: str, lease_now: int) -> list[Lease]:
        """Its committed leases not ended by ``lease_now`` (:meth:`_lease_now`; an ended
        run keeps only how often its positions were handed out)."""
        return [run for run in self._committed(group, topic) if run[2] > lease_now]

    def _lease_now(self, now: int) -> int:
        """The time leases end by: ``now``, but never past the latest entry applied. A
        master back from a silence (stopped, or its clock held) is past it before the
        entry that gives its leases the silence back has applied: by its own clock they
        would have ended, and gone to a second consumer."""
        applied = self.view.applied_clock_ms
        return now if applied is None else min(now, applied)

    def _leases_of(self, group: str, topic: str) -> dict[int, int]:
        """This master's leases of a ready log: position -> expiry (ms)."""
        leases = self.leases.get((group, topic))
        if leases is None:
            leases = self.leases[(group, topic)] = {}
            extended = self._extended.setdefault((group, topic), {})
            for lo, hi, until, token, *_ in self._running(group, topic, self._lease_now(self._clock())):
                leases.update(dict.fromkeys(range(lo, hi), until))
                if token != until:
                    extended.update(dict.fromkeys(range(lo, hi), token))
        return leases

    # -- pull ---------------------------------------------------------------------

    def _scan(
        self,
        group: str,
        topic: str,
        filt: TagFilter,
        want: int,
        now: int,
        out: Taken,
        skipped: list[tuple[str, str, int, int]],
        visibility_ms: int,
        origin: str | None = None,
        wake_at: list[int] | None = None,
        ahead_ms: int = 0,
    ) -> list[int]:
        """Lease up to ``want`` messages of ready log ``topic`` to this caller; the
        positions leased, in the order they went to ``out``.

        A ready message not yet due (the wheel fires ahead by its lead:
        node/wheel_driver.py) is not handed out before ``ahead_ms`` ahead of its time (0:
        once due); like a leased one, it bounds how long the scan's stopping point holds.
        That time goes to ``wake_at``: a pull waiting for messages wakes then.

        It starts where the last scan with the same filter stopped (``_cursors``): every
        entry before that was acked, skipped or leased then, and stays so until the
        earliest of those leases expires. Without it each pull of a hot second re-read
        every entry leased since the group's committed offset."""
        reads = self.view.reads
        leases = self._leases_of(group, topic)
        extended = self._extended.get((group, topic))
        progress = self.view.group_progress(group, topic)
        floor = max(progress.committed, reads.ready_base(topic))  # below the base: removed by retention
        key = (group, topic, filt, origin, ahead_ms)  # what a scan passed over depends on each
        resume, until = self._cursors.get(key, (floor, 0))
        if until > now and resume > floor:
            start = resume
        else:
            # Held at most CURSOR_MS even without leases: a skip-ack that failed is sent again.
            start, until = floor, now + CURSOR_MS
        # Bounded: a filter that matches little, or a group far behind, scans at most
        # SCAN_LIMIT entries not acked past its committed offset; the skip-acks move it past
        # them. (So leases too stay within SCAN_LIMIT entries not acked of it; a message
        # leased for long holds it back, the acked ranges after it do not count.) A scan
        # reads at most SCAN_LIMIT entries, passing over an acked range it starts a read
        # in; the next goes on from where it stopped (its cursor).
        end = min(reads.ready_count(topic), progress.unacked_end(floor, SCAN_LIMIT))
        chunk = max(4 * want, 1024)  # most pulls find what they want right at the cursor
        lease = now + visibility_ms
        lease_now = self._lease_now(now)
        exact = bool(filt.tags) or origin is not None  # checks that read the record
        leased: list[int] = []
        passed: list[int] = []  # filtered out for this group, or removed by retention
        budget = SCAN_LIMIT  # entries read, acked or not: the window may reach far past the floor
        while budget > 0 and (start := progress.first_unacked(start)) < end and len(out) < want:
            try:
                rows = reads.read_ready(topic, start, min(end, start + chunk, start + budget))
            except ReadyTrimmedError:
                break  # cut since the view's state: the next state names the new base
            budget -= len(rows)
            offsets = start + np.arange(len(rows), dtype=np.int64)
            # A retry topic holds every topic's retries: which topic a row came from is in
            # its record, so there the prefilter cannot tell one to pass over.
            keep = filt.prefilter(rows["tag_sig"]) if origin is None else np.ones(len(rows), bool)
            acked = progress.acked_mask(offsets)
            passed += offsets[~keep & ~acked].tolist()
            # Never handed out before its time less ahead_ms, by this clock.
            due = rows["deliver_at_ms"] <= now + ahead_ms
            free = np.flatnonzero(keep & ~acked & due)  # row numbers that may be handed out
            if not due.all():  # held like a lease, until it is due: the cursor may pass it till then
                until = min(until, int(rows["deliver_at_ms"][~due].min()) - ahead_ms)
            scanned, used = len(rows), 0
            while used < len(free) and len(out) < want:
                # Read no more than could still be handed out, and those together (a hot
                # second's lie side by side in their hour's log: one read). Leases are
                # looked up for these only: what lies after is not passed over.
                take = free[used : used + want - len(out)]
                used += len(take)
                if leases:
                    looked = offsets[take].tolist()
                    ends = np.fromiter((leases.get(o, 0) for o in looked), np.int64, len(take))
                    held = ends > lease_now
                    if held.any():
                        first = int(ends[held].min())
                        # Ended by this clock, not yet by the applied clock: look again as
                        # much later as the applied clock lags (a wait of 0 scans on and on).
                        until = min(until, first if first > now else first + now - lease_now)
                        take = take[~held]
                part = rows[take]
                offs = offsets[take].tolist()
                records = read_all(reads, part["hour"], part["global_index"])
                good = []  # places in take of what is handed out
                for k, record in enumerate(records):
                    if record is None:
                        verdict = PASS  # removed by retention
                    else:
                        verdict = _verdict(record, filt, origin) if exact else TAKE
                    if verdict is TAKE:
                        good.append(k)
                    elif verdict is PASS:
                        passed.append(offs[k])
                if len(good) < len(take):
                    offs, records = [offs[k] for k in good], [records[k] for k in good]
                    part = part[good]
                leases.update(dict.fromkeys(offs, lease))  # made final by pull: _lease_until
                if extended:
                    for o in offs:
                        extended.pop(o, None)
                leased += offs
                self._observe_lateness(np.maximum(now - part["deliver_at_ms"], 0) / 1000)
                out.records += records
                out.deliver_at += part["deliver_at_ms"].tolist()
                out.delivered_at += part["delivered_at_ms"].tolist()
            if len(out) >= want and used < len(free):
                scanned = int(free[used - 1]) + 1  # what lies after was not looked at
            start += scanned
            chunk = min(SCAN_CHUNK, 4 * chunk)
        if leased:
            until = min(until, lease)
        self._cursors[key] = (start, until)
        if wake_at is not None:
            wake_at.append(until)  # what it passed may be handed out then: due, or a lease expired
        skipped.extend((group, topic, lo, hi) for lo, hi in to_ranges(passed))
        return leased

    async def pull(
        self,
        group: str,
        topic: str,
        tags: str | None,
        max_messages: int,
        wait_ms: int,
        visibility_ms: int,
        ahead_ms: int = 0,
        pull_id: str | None = None,
        gone: Callable[[], bool] = lambda: False,
    ) -> Pulled:
        """The messages leased, and one receipt per ready log read that names all of those
        it leased (pull_wire writes them out). ``ahead_ms``: messages already ready (fired
        ahead by the wheel's lead) may be handed out that long before their time.
        ``pull_id``: the pull's name, the same each time it is sent: if a pull of that name
        already leased messages (its answer was lost, with its master or on the way), they
        are its answer again, with the same lease; if it still runs here (the client gave
        up waiting and sent it again), this waits for it and answers the same. ``gone()``:
        whether the caller hung up; a pull that finds it has leases nothing and raises
        :class:`CallerGone`, looked at before its leases are proposed and at every wake of
        its wait (at least once a second). Its leases may still commit after a hang-up that
        comes later, as after an answer lost on the way: they end with their lease, or the
        pull sent again by name gets them."""
        call = (group, topic, tags, max_messages, wait_ms, visibility_ms, ahead_ms, gone)
        if not pull_id:
            return await self._pull(*call)
        named = (group, topic, pull_id)
        while (running := self._named.get(named)) is not None:
            await asyncio.shield(running)
        self._require_master()
        again = self._again(group, topic, pull_id)
        if again is not None:
            return again
        done = self._named[named] = asyncio.get_running_loop().create_future()
        try:
            return await self._pull(*call, pull_id)
        finally:
            if self._named.get(named) is done:
                del self._named[named]
            done.set_result(None)

    async def _pull(
        self,
        group: str,
        topic: str,
        tags: str | None,
        max_messages: int,
        wait_ms: int,
        visibility_ms: int,
        ahead_ms: int,
        gone: Callable[[], bool],
        pull_id: str | None = None,
    ) -> Pulled:
        filt = TagFilter.parse(tags)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        while True:
            self._require_master()  # again after every wait: the role may have gone meanwhile
            out = Taken()
            skipped: list[tuple[str, str, int, int]] = []
            wake_at: list[int] = []  # when the scans' stopping points stop holding
            now = self._clock()
            scan = (filt, max_messages, now, out, skipped, visibility_ms)
            leased: dict[str, list[int]] = {}
            if not topic.startswith(DLQ_PREFIX):  # its retries fallen due first: due before the rest
                retries = retry_topic(group)
                leased[retries] = self._scan(
                    group, retries, *scan, origin=topic, wake_at=wake_at, ahead_ms=ahead_ms
                )
            if len(out) < max_messages:
                leased[topic] = self._scan(group, topic, *scan, wake_at=wake_at, ahead_ms=ahead_ms)
            if skipped:  # filtered out for this group: let its committed offset move past them
                self._queue(skipped)
            remaining = deadline - loop.time()
            if out or remaining <= 0:
                until = self._lease_until(group, leased, out, now, visibility_ms)
                if gone():  # nobody to answer: the messages stay for the next pull
                    self._drop_leases(group, leased, until)
                    raise CallerGone(HUNG_UP)
                await self._commit_leases(group, leased, until, pull_id)
                if out:
                    answered = self._answerable(group, leased, out, until)
                    if answered is None:
                        continue  # the leases ended while they committed: scan again
                    leased, out = answered
                return self._handed(group, leased, out, until)
            if gone():  # the caller hung up while it waited: nothing to wait for
                raise CallerGone(HUNG_UP)
            wait = min(remaining, 1.0)  # leases expire too
            if wake_at:  # when a message passed over falls due (or its lease ends)
                wait = min(wait, (min(wake_at) - self._clock()) / 1000)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(wait, 0.0)):  # not wait_for: it can drop a cancel
                    await self._arrived.wait()

    def _answerable(
        self, group: str, leased: dict[str, list[int]], out: Taken, until: int
    ) -> tuple[dict[str, list[int]], Taken] | None:
        """What a pull whose leases (taken to end at ``until``, their token) just committed
        may hand out: the positions whose committed lease is still its own and holds, and
        their messages (None: none is). The commit may have taken long (a master cut off,
        whose entries a later master committed): a node that no longer leads answers
        nothing (NotMasterError), and leases that ended meanwhile go to nobody, since
        another pull may hold those messages now (the simulator's node services, seed 98).
        They end where the committed leases say: the entry of a silence that applied right
        after theirs moved them on (cluster/leases.py), and the messages are theirs till then.
        A position acked meanwhile (a late ack of a lease that had ended, committed with
        these or just after) is left out, and the others answered: scanned again, they would
        be passed over as leased, to nobody.
        A handover that began meanwhile is no reason to answer nothing: the leases committed,
        and a release of them could not be proposed now (the pull made again, without a
        name, would find them leased for their visibility)."""
        try:
            self._require_leading()
        except NotMasterError:
            # Nobody is answered them: given back (a master that still leads commits the
            # release; the pull made again by a held request takes them, MasterHold.through).
            items = [(group, r, lo, hi, 0) for r, offs in leased.items() for lo, hi in to_ranges(offs)]
            self._give_back(items)
            self._queue(items)
            raise
        now = self._clock()
        keep = {}  # per ready log, which of its positions this pull may hand out
        for ready, offsets in leased.items():
            if offsets:
                keep[ready] = self._committed(group, ready).held_by(offsets, until, now)
        if all(k.all() for k in keep.values()):
            return leased, out
        if not any(k.any() for k in keep.values()):
            return None
        answered: dict[str, list[int]] = {}
        kept = Taken()
        at = 0  # ``out`` holds the messages of ``leased``'s positions, in its order
        for ready, mask in keep.items():  # the ready logs it leased from (none empty), in order
            offsets = leased[ready]
            mine = self.leases.get((group, ready), {})
            for k, offset in enumerate(offsets):
                if mask[k]:
                    answered.setdefault(ready, []).append(offset)
                    kept.records.append(out.records[at + k])
                    kept.deliver_at.append(out.deliver_at[at + k])
                    kept.delivered_at.append(out.delivered_at[at + k])
                elif mine.get(offset) == until:
                    del mine[offset]  # not this pull's any more: as the committed leases say
            at += len(offsets)
        return answered, kept

    def _lease_until(
        self, group: str, leased: dict[str, list[int]], out: Taken, now: int, visibility_ms: int
    ) -> int:
        """The expiry of a pull's leases: ``visibility_ms`` from now, or, when it took
        messages ahead, from the latest ``deliver_at`` among them (the consumer holds each
        until its time); past every token those positions were handed out under before,
        for it is their token too (cluster/leases.py): a receipt of a lease given back
        must not name this one. Every lease the scans took is set to it."""
        until = now + visibility_ms + max(0, max(out.deliver_at, default=now) - now)
        for ready, offsets in leased.items():
            if offsets:
                until = max(until, int(self._committed(group, ready).tokens_of(offsets).max()) + 1)
        if until != now + visibility_ms:
            for ready, offsets in leased.items():
                self.leases[(group, ready)].update(dict.fromkeys(offsets, until))
        return until

    def _again(self, group: str, topic: str, pull_id: str) -> Pulled | None:
        """What the pull named ``pull_id`` leased and still holds, as its answer again
        (None: no such pull, or its leases ended). Only committed leases count: a pull
        still committing here has not answered yet."""
        now = self._clock()
        reads = self.view.reads
        leased: dict[str, list[int]] = {}
        out = Taken()
        until = 0
        for ready in ready_logs(group, topic):
            mine = self._leases_of(group, ready)
            for lo, hi, run_until, token, *_ in self._committed(group, ready).of_pull(
                pull_id, self._lease_now(now)
            ):
                # not acked or released since
                offsets = [o for o in range(lo, hi) if mine.get(o) == run_until]
                if not offsets:
                    continue
                rows = reads.read_ready(ready, offsets[0], offsets[-1] + 1)[np.asarray(offsets) - offsets[0]]
                out.records += read_all(reads, rows["hour"], rows["global_index"])
                out.deliver_at += rows["deliver_at_ms"].tolist()
                out.delivered_at += rows["delivered_at_ms"].tolist()
                leased.setdefault(ready, []).extend(offsets)
                # The receipts carry the token, as the lost answer's did: extend and release
                # look for it. A lease moved on between terms (cluster/leases.py) ends later.
                until = token
        if not leased:
            return None
        return self._handed(group, leased, out, until)

    async def _commit_leases(
        self, group: str, leased: dict[str, list[int]], until: int, pull_id: str | None = None
    ) -> None:
        """Replicate a pull's leases before it answers (named ``pull_id``, when it has a
        name). If that fails, nobody holds them: they end here too, and the error goes to
        the caller."""
        named = (until, pull_id) if pull_id else ()
        items = [
            (group, ready, lo, hi, until, *named)
            for ready, offsets in leased.items()
            for lo, hi in to_ranges(offsets)
        ]
        if not items:
            return
        try:
            await self._commit(items)
        except BaseException:
            self._drop_leases(group, leased, until)
            raise

    def _drop_leases(self, group: str, leased: dict[str, list[int]], until: int) -> None:
        """Forget a pull's leases (taken to end at ``until``) that nobody holds: the next
        scans hand those messages out again."""
        for ready, offsets in leased.items():
            leases = self.leases.get((group, ready), {})
            for o in offsets:
                if leases.get(o) == until:
                    del leases[o]
            self._rescan(group, ready)

    async def _commit(self, items: list[tuple]) -> None:
        """Acks (4 fields) or lease items (5 to 7: cluster/leases.py) into A entries, in
        order; once all are applied."""
        await asyncio.gather(*(self.entry_commit.enqueue(part, size) for part, size in ack_parts(items)))

    def _queue(self, items: list[tuple]) -> None:
        """:meth:`_commit` not waited for: queued in order now, a failure logged."""
        for part, size in ack_parts(items):
            self.entry_commit.enqueue(part, size).add_done_callback(_logged)

    def _handed(self, group: str, leased: dict[str, list[int]], out: Taken, lease_until: int) -> Pulled:
        """What a pull answers: a batch receipt per ready log it leased from, and each
        message with a receipt of its own (``leased``'s positions are ``out``'s, in order),
        and how often it has been handed out, as the committed leases count."""
        batch, each, deliveries = [], [], []
        for ready, offsets in leased.items():
            if offsets:
                receipt, members = self.receipts.issue_batch(group, ready, offsets, lease_until)
                batch.append(receipt)
                each += members
                deliveries += np.maximum(self._committed(group, ready).deliveries_of(offsets), 1).tolist()
        return Pulled(out, each, batch, deliveries)

    # -- ack / nack ---------------------------------------------------------------

    async def ack(self, group: str, topic: str, receipts: list) -> int:
        """Ack what ``receipts`` name (one message each, or a pull's batch), handed out by
        pulls of ``topic``; how many."""
        acks = [
            (group, ready, lo, hi)
            for ready, ranges in self._open(group, topic, receipts)
            for lo, hi in ranges
        ]
        if acks:
            await self._commit(acks)
        # Only now: until the ack is applied, the lease is what keeps the message from
        # being handed out again.
        self._release(acks)
        return sum(hi - lo for *_, lo, hi in acks)

    def _open(self, group: str, topic: str, receipts: list) -> list[tuple[str, list[Range]]]:
        """Per ready log, the positions ``receipts`` name, merged (each once)."""
        by_ready: dict[str, list[Range]] = {}
        for ready, ranges, _ in self.receipts.open_leases(group, receipts, ready_logs(group, topic)):
            by_ready.setdefault(ready, []).extend(ranges)
        return [(ready, merge_ranges(ranges)) for ready, ranges in by_ready.items()]

    def give_back(self, group: str, topic: str, receipts: list) -> int:
        """End the leases ``receipts`` name with neither an ack nor an attempt: the
        messages may be handed out again at once (a push group that stops gives back
        what it leased and has not sent). How many. Replicated after it returns (queued
        before any later lease of them)."""
        items = [
            (group, ready, lo, hi, 0)
            for ready, ranges in self._open(group, topic, receipts)
            for lo, hi in ranges
        ]
        self._give_back(items)
        self._queue(items)
        return sum(hi - lo for _, _, lo, hi, _ in items)

    def _give_back(self, items: list[tuple]) -> None:
        """Forget the leases of ``items`` here; a scan may pass over them again at once."""
        self._release([item[:4] for item in items])
        for group, topic in {item[:2] for item in items}:
            self._rescan(group, topic)
        self.notify()

    def _rescan(self, group: str, topic: str) -> None:
        """The next scans of a ready log start again from the group's committed offset:
        what the last ones passed over as leased may be handed out again."""
        for key in [k for k in self._cursors if k[0] == group and k[1] == topic]:
            del self._cursors[key]

    def _positions(
        self, group: str, topic: str, receipts: list, lease_now: int
    ) -> Iterator[tuple[str, int, int, bool | None]]:
        """Each position ``receipts`` name, as ``(ready log, offset, token, ours)``: ``ours``
        is None when no lease holds it now, else whether the lease holding it is the
        receipt's (not one a pull handed out again since: cluster/leases.py; nor a hold
        while a nack or a purge commits, whatever an ended extend left in ``_extended``)."""
        for ready, ranges, token in self.receipts.open_leases(group, receipts, ready_logs(group, topic)):
            leases = self._leases_of(group, ready)
            extended = self._extended.get((group, ready), {})
            for lo, hi in ranges:
                for off in range(lo, hi):
                    until = leases.get(off, 0)
                    ours = until != HELD and extended.get(off, until) == token
                    yield ready, off, token, (ours if until > lease_now else None)

    def _held(
        self, group: str, topic: str, receipts: list
    ) -> tuple[list[tuple[str, str, int, int, int]], int]:
        """The positions ``receipts`` name whose lease is still the one their pull handed
        out, and live: ``(group, topic, lo, hi, token)`` runs; and this clock."""
        now = self._clock()
        mine: dict[tuple[str, int], list[int]] = {}
        for ready, off, token, ours in self._positions(group, topic, receipts, self._lease_now(now)):
            if ours:
                mine.setdefault((ready, token), []).append(off)
        held = [(group, t, lo, hi, token) for (t, token), offs in mine.items() for lo, hi in to_ranges(offs)]
        return merge_held(held), now

    async def release(self, group: str, topic: str, receipts: list) -> int:
        """Give leases back now, no attempt counted (a worker's warm shutdown): handed out
        again at once. Only leases still held under these receipts; how many."""
        held, _ = self._held(group, topic, receipts)
        items = [(g, t, lo, hi, 0) for g, t, lo, hi, _ in held]
        self._give_back(items)
        if items:
            await self._commit(items)
        return sum(hi - lo for _, _, lo, hi, _ in items)

    async def extend(self, group: str, topic: str, receipts: list, visibility_ms: int) -> tuple[int, int]:
        """Renew leases still held under these receipts to ``visibility_ms`` from now (the
        receipts stay good); how many, and the new expiry. Never shorter than they held:
        quorum time falls back when the clocks of a new majority lag (a peer down, another
        behind), and a lease cut below the end its holder was told would go to another
        consumer while the holder works on (the simulator's node services, seed 55)."""
        held, now = self._held(group, topic, receipts)
        ends = [self._leases_of(g, t)[o] for g, t, lo, hi, _ in held for o in range(lo, hi)]
        until = max([now + visibility_ms, *ends])
        # A lease never extended ends at its token: kept as it is (until == token), it
        # moves nothing, and its item would read as a hand-out (cluster/leases.py).
        moved = [run for run in held if run[4] != until]
        for g, t, lo, hi, token in moved:
            self.leases[(g, t)].update(dict.fromkeys(range(lo, hi), until))
            self._extended.setdefault((g, t), {}).update(dict.fromkeys(range(lo, hi), token))
        if moved:
            await self._commit([(g, t, lo, hi, until, token) for g, t, lo, hi, token in moved])
        return sum(hi - lo for _, _, lo, hi, _ in held), until

    # -- a group's backlog --------------------------------------------------------------

    async def backlog(self, group: str, topic: str) -> dict:
        """``group``'s messages of ready log ``topic`` it has not acked (``unacked``), of
        those how many a consumer holds (``leased``: a lease not ended), and how many wait
        for a pull (``waiting``: the rest, due). A task queue's queue length is ``waiting``."""
        self._require_master()
        now = self._clock()
        unacked = self.view.unacked_count(group, topic)
        leased = len(self.held_positions(group, topic, now))
        waiting = await self._unheld(group, topic, now)
        return {"topic": topic, "group": group, "unacked": unacked, "leased": leased, "waiting": len(waiting)}

    async def purge(self, group: str, topic: str) -> int:
        """Ack every message of ready log ``topic`` that ``group`` has not acked, that is
        due, and that no consumer holds: what a task queue's purge drops. Leased ones stay
        with their consumers; messages due later (still scheduled, or fired ahead) stay too.
        How many were acked."""
        self._require_master()
        unheld = await self._unheld(group, topic, self._clock())
        purged = 0
        # A chunk at a time, each held while its acks commit: the loop is free between
        # two, and a message a pull took meanwhile stays with its consumer (counted as
        # purged neither while it holds it nor once it acked it).
        for start in range(0, len(unheld), PURGE_CHUNK):
            held = self.held_positions(group, topic)
            part = np.asarray(unheld[start : start + PURGE_CHUNK], dtype=np.int64)
            part = part[~self.view.group_progress(group, topic).acked_mask(part)]  # acked since
            chunk = [off for off in part.tolist() if off not in held]
            acks = [(group, topic, lo, hi) for lo, hi in to_ranges(chunk)]
            if acks:
                with self.held_meanwhile(group, [(topic, off) for off in chunk]):
                    await self._commit(acks)
                self._release(acks)
            purged += len(chunk)
        return purged

    async def _unheld(self, group: str, topic: str, now: int) -> list[int]:
        """The positions of ``topic``'s ready log that ``group`` has not acked, that are due
        by ``now``, and that no lease holds as it returns (a pull may lease some while it
        reads). Read in chunks, the loop free between two."""
        reads = self.view.reads
        progress = self.view.group_progress(group, topic)
        start = max(progress.committed, reads.ready_base(topic))
        end = reads.ready_count(topic)
        out: list[np.ndarray] = []
        while start < end:
            reads = self.view.reads  # the latest state: the loop served others since the last chunk
            try:
                rows = reads.read_ready(topic, start, min(end, start + BACKLOG_CHUNK))
            except ReadyTrimmedError:  # retention cut it meanwhile: those entries are gone
                start = max(start + 1, reads.ready_base(topic))
                continue
            offsets = start + np.arange(len(rows), dtype=np.int64)
            out.append(offsets[~progress.acked_mask(offsets) & (rows["deliver_at_ms"] <= now)])
            start += len(rows)
            await asyncio.sleep(0)
        held = np.fromiter(self.held_positions(group, topic, now), dtype=np.int64)
        due = np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
        return due[~np.isin(due, held)].tolist()

    def held_positions(self, group: str, topic: str, now: int | None = None) -> set[int]:
        """The positions of ready log ``topic`` a lease of ``group`` holds at ``now`` (the
        clock's now by default), on this master."""
        lease_now = self._lease_now(self._clock() if now is None else now)
        return {o for o, until in self._leases_of(group, topic).items() if until > lease_now}

    @contextlib.contextmanager
    def held_meanwhile(self, group: str, positions: list[tuple[str, int]]) -> Iterator[None]:
        """Hold ``positions`` (ready log, offset) while the entry that settles them commits:
        a scan hands none of them out meanwhile (one it leased would go to a consumer
        whose ack then stopped nothing). If the commit fails each gets back what it had."""
        holds = {(ready, off): self._leases_of(group, ready).get(off) for ready, off in positions}
        for ready, off in positions:
            self._leases_of(group, ready)[off] = HELD
        try:
            yield
        except BaseException:
            for (ready, off), until in holds.items():
                leases = self._leases_of(group, ready)
                if until is None:
                    leases.pop(off, None)
                else:
                    leases[off] = until
            raise

    def _nackable(self, group: str, topic: str, receipts: list, lease_now: int) -> list[tuple[str, int]]:
        """The positions ``receipts`` name, each once, less those leased again under
        another token since (cluster/leases.py) and still held."""
        named = self._positions(group, topic, receipts, lease_now)
        return list(dict.fromkeys((ready, off) for ready, off, _, ours in named if ours is not False))

    def _release(self, acks: list[tuple[str, str, int, int]]) -> None:
        """Forget what this master holds of the positions ``acks`` settled: their leases,
        and the tokens extends left."""
        for group, topic, lo, hi in acks:
            leases = self.leases.get((group, topic), {})
            extended = self._extended.get((group, topic), {})
            for off in range(lo, hi):
                leases.pop(off, None)
                extended.pop(off, None)

    async def nack(
        self,
        group: str,
        topic: str,
        receipts: list,
        retry_after_ms: int | None = None,
        dead_letter: bool = False,
    ) -> dict:
        """Retry at the next level, or dead-letter after the last (``dead_letter``: now,
        whatever the level). ``retry_after_ms`` (a push receiver's ``Retry-After``) brings
        the retry forward, never past the level. Only messages whose lease is still the
        receipt's, or that no lease holds: one handed out again since the receipt's lease
        ended is the other consumer's to settle (its ack would not stop a retry filed now)."""
        reads = self.view.reads
        now = self._clock()
        retries, kept = [], []
        named = self._nackable(group, topic, receipts, self._lease_now(now))
        progress = {ready: self.view.group_progress(group, ready) for ready, _ in named}
        # Acked: no copy (one retention removed since answers 404 expired, read below).
        named = [
            (ready, off)
            for ready, off in named
            if not progress[ready].is_acked(off) or off < reads.ready_base(ready)
        ]
        for ready, off in named:
            try:
                rows = reads.read_ready(ready, off, off + 1)
            except ReadyTrimmedError as e:
                raise ReceiptExpired(str(e), "receipts") from e
            if len(rows) == 0:
                raise NotFound(f"no delivered message at {ready}@{off}", "receipts")
            mid = MessageId(int(rows["hour"][0]), int(rows["global_index"][0]))
            attempt = reads.read_message(mid).message.attempt
            if attempt < len(self.retry_levels_ms) and not dead_letter:
                delay = self.retry_levels_ms[attempt]
                if retry_after_ms is not None:
                    delay = min(delay, retry_after_ms)
                if ready.startswith(DLQ_PREFIX):  # no pull of a DLQ reads a retry log
                    kept.append((ready, off, now + delay))
                else:
                    retries.append((group, ready, off, now + delay))
            else:
                retries.append((group, ready, off, -1))  # past the last level: the DLQ
        with self.held_meanwhile(group, named):
            # What the entry did, not what was asked: a message nacked twice, or acked (on
            # another hand-out) before this nack applied, gets no copy.
            done = await self._propose(RETRY, retries=retries) if retries else None
            held = await self._hold_in_place(group, kept)
        self._release([(g, ready, off, off + 1) for g, ready, off, _at in retries])
        for (ready, off), (until, token) in held.items():  # as a new master would load them
            self._leases_of(group, ready)[off] = until
            self._extended.setdefault((group, ready), {})[off] = token
        self._cursors.clear()  # a nacked entry is handed out again: scans start over
        if done is None:
            return {"retried": len(held), "dead_lettered": 0}
        return {"retried": len(done.id_gis) + len(held), "dead_lettered": done.dead_lettered}

    async def _hold_in_place(
        self, group: str, kept: list[tuple[str, int, int]]
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """Retry dead letters where they are: the lease of each ``(DLQ, offset, at)`` moved to
        end at ``at`` under its own token (an extend: cluster/leases.py), after which it is
        handed out again. The end and token each got, by position."""
        items = []
        tables: dict[str, LeaseTable] = {}  # each ready log's committed leases, read once
        for ready, off, at in kept:
            if ready not in tables:
                tables[ready] = self._committed(group, ready)
            token = int(tables[ready].tokens_of([off])[0])
            items.append((group, ready, off, off + 1, at + (at == token), token))  # not read as a hand-out
        if items:
            await self._commit(items)
        return {(ready, off): (until, token) for _, ready, off, _hi, until, token in items}


def ack_parts(acks: list[tuple[str, str, int, int]]) -> list[tuple[list[tuple[str, str, int, int]], int]]:
    """``acks`` cut into parts that each fit one A entry (``MAX_ITEMS_BYTES`` by
    ``ack_bytes``), with their sizes. A pull's skip-acks can be 131,072 ranges (every
    other entry of ``SCAN_LIMIT`` passed over), an ack call's receipts as many more;
    at 281 bytes an ack with the longest names, one entry would pass 4 MiB."""
    parts: list[tuple[list[tuple[str, str, int, int]], int]] = []
    part: list[tuple[str, str, int, int]] = []
    size = 0
    by_names: dict[tuple[str, str, int], int] = {}  # an item's size depends on its names and length only
    for ack in acks:
        n = by_names.get((*ack[:2], len(ack)))
        if n is None:
            n = by_names[(*ack[:2], len(ack))] = ack_bytes([ack])
        if part and size + n > MAX_ITEMS_BYTES:
            parts.append((part, size))
            part, size = [], 0
        part.append(ack)
        size += n
    if part:
        parts.append((part, size))
    return parts


def merge_held(held: list[tuple[str, str, int, int, int]]) -> list[tuple[str, str, int, int, int]]:
    """Runs of one (group, topic, token) merged: receipts naming a position twice name it once."""
    by: dict[tuple[str, str, int], list[Range]] = {}
    for group, topic, lo, hi, token in held:
        by.setdefault((group, topic, token), []).append((lo, hi))
    return [(g, t, lo, hi, token) for (g, t, token), ranges in by.items() for lo, hi in merge_ranges(ranges)]


def _logged(fut: asyncio.Future) -> None:
    """A skip-ack or a give-back that was not replicated: the next scan skips the
    messages again; a lease given back ends anyway when it expires."""
    if not fut.cancelled() and fut.exception() is not None:
        log.warning("acks or leases given back were not replicated: %s", fut.exception())


TAKE, PASS, LEAVE = "take", "pass", "leave"


def _verdict(record: bytes, filt: TagFilter, origin: str | None) -> str:
    """What a scan does with a message the prefilter let through: TAKE it; PASS over it
    for good (skip-acked: filtered out for this group); or, in a retry topic, LEAVE
    another topic's retry for that topic's pulls."""
    fields = unpack_record(record)
    if origin is not None and fields["headers"].get(ORIGIN_HEADER, fields["topic"]) != origin:
        return LEAVE
    return TAKE if filt.matches(fields["tags"]) else PASS


def read_all(reads, hours: np.ndarray, gis: np.ndarray) -> list[bytes | None]:
    """The records of messages ``hours``/``gis`` (None for one that retention removed),
    read together."""
    try:
        return reads.read_records_at(hours, gis)
    except UnknownMessageError:
        pass
    out = []
    for k in range(len(hours)):
        try:
            out.extend(reads.read_records_at(hours[k : k + 1], gis[k : k + 1]))
        except UnknownMessageError:
            out.append(None)
    return out
