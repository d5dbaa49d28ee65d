"""What users do to a simulated cluster of node services (``--service``), and the checks on
what consumers receive.

A producer and two consumers of one group call what the HTTP handlers call
(node/http/messages.py, node/http/consumers.py): the master check, then the service. The
check is ``require_master`` at once, or with ``--hold`` the routes' own
(``MasterHold.check``: a master that may not serve for a moment holds the request).
A request reaches its node's loop 0.1-1 ms after it is sent; its answer is taken when the
task ends; one not answered within ``TIMEOUT_S`` is given up (the node crashed, or a
link or a stop held it; a scripted scenario may set a shorter ``timeout_s``, for all or
for one actor). A node that is not master sends the caller to the master it knows (a
307); a master that may not serve (a 503), a lost request or a timeout sends it on to
another node at random.

- **Producer:** every 2-40 ms, 1-3 messages to the two topics, due -0.5..4 s from now,
  half of them keyed. An answered produce is an acknowledged entry: held by a majority
  from then on, and its messages in every ready log at the end (sim/world.py). With
  ``--lateness``, a third of them carry a lateness policy: ``max_lateness`` 0, 30, 300
  or 1,500 ms, then ``drop`` or ``dlq`` (one due already is past a short allowance as
  it arrives; a move into the past, or an outage, makes others late).
- **Consumers:** pull 1-8 messages of a topic (and its group's retries) with a
  visibility of 0.3-1.5 s, waiting 0, 50 or 200 ms; then, per message, ack (most),
  nack, release, extend (to 1.5-3 s, then ack in its second half) or forget it (its lease runs
  out), each after a delay that may pass the lease's end.
- **Editor:** every 10-60 ms, a message not due for 200 ms yet: cancel it (a third) or
  move it to -0.2..3 s from now, by id or, for a keyed one, by key (half). A request
  in flight, or one never answered, may have been made: until an answer says otherwise,
  the message may fire at its new time, or never (``Produced``).
- **Admin** (a forced release, drawn as a fault by sim/world.py): ``Handover.release``
  on the node it takes for master, as ``POST /admin/release-master`` calls it.
- **Scheduler** (``--schedules``): from 0.5-1 s, creates the recurring schedule
  ``SCHEDULE`` (every second, on its own topic), as ``POST /v1/schedules`` does; then
  pauses it 1-2.5 s after each answer and resumes it 0.3-1.5 s after, each asked again
  until answered (a retry of a create or a pause is answered as made). The consumers pull
  its topic too. The nodes plan its firings 1 s ahead (sim/service.py), so every master
  of the run plans some, and one elected after an outage finds fire times passed and
  unplanned. Once a pause or a resume fails past the master check, or is not answered, it
  may take effect at any moment later: the checks of pauses stop at its first sending
  (``Workload.unknown_from``).

Checked on every pull's answer, per message and attempt (a nack's retry is the next
attempt), by the world's true clock:

- ``handed-out-early``: before its deliver time;
- ``acked-handed-out-again``: in a pull sent after an ack of it was answered;
- ``handed-out-inside-a-lease``: while an earlier hand-out's lease holds: until the
  ``lease_until`` its receipt names (the chaos checker's rule, chaos_tests/checker.py),
  unless its consumer sent a release or a nack of it before this answer;
- ``lease-as-asked``: a lease that ends more than ``LEASE_LAG_MS`` before ``visibility``
  from when its pull was sent (stamped by a clock far behind the true time), plus the
  most any node's clock has been behind so far (with one node cut off, quorum time of
  three follows the later of the other two), plus half the worst asymmetry of a link's
  delays so far (a reading is aged by half the round trip: it lags by half the
  difference when it came the slow way);
- ``cancelled-handed-out``: a message a cancel was answered as made for, handed out
  before or after;
- ``rescheduled-at-old-time``: a first hand-out fired for a time the message cannot
  have now (moved away from it);
- ``edit-names-its-message``: a cancel or move by key answered for another message;
- ``extended-a-lost-lease``: an extend that renewed every lease it named, of a message
  another consumer was handed between the hand-out and the extended end (an extended
  lease also bounds later hand-outs, as ``handed-out-inside-a-lease``);
- ``schedule-fired-off-plan``: a firing's first hand-out due at a time that is not a
  whole second, or keyed for another fire time than it is due at;
- ``schedule-fired-twice``: a fire time handed out (first) as two messages;
- ``schedule-fired-while-paused``: a firing due after a pause was answered (and the
  slack and the fire lead) and before its resume was sent (less the lag of
  ``lease-as-asked``).

At the end (sim/world.py), with the chaos checker: no cancelled message in a ready log,
and none fired for a time it was moved away from. With ``--lateness``
(``late-policy``), by the clock of the entry that decided: every node dropped and
dead-lettered the same messages, each past its allowance and as its policy says, and
none of them is in a ready log; every message with a policy in a ready log was
delivered within it (one dropped or dead-lettered is owed no place there); the group's
dead-letter queue is alike on every node and holds each dead-lettered one at most once.
With ``--retention``, one owed and no longer in the ready logs must have been handed out,
or due before the group had progress on its topic (``trimmed_unseen``), or have a policy
and an hour retention removed. With ``--schedules``, by the committed schedule (its
creation's clock, and its mark: every fire time up to it was planned or skipped by a
pause), in every node's ready log of the schedule's topic: each fire time planned and
due before the watermark once (``schedule-missed``, ``schedule-fired-twice``), but those
a pause may have skipped, none that was not planned (``schedule-fired-off-plan``), and
none inside a pause as above.

Each bound is loosened by ``slack_ms``: how far the cluster's time may run ahead of the
true time by design (node/quorum_clock.py): the clock a majority is ahead by, at the
worst moment so far, each node's clock counted at its most ahead over the time a reading
of it stays fresh, plus half the worst asymmetry of a link's delays so far (a reading
is aged by half the round trip), plus what a drifting or stepped monotonic clock adds to a reading's
age (the design assumes they run true), plus ``BASE_SLACK_MS`` for ms truncations and
jitter.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter, deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field

import numpy as np

from chaos_tests.checker import lease_end
from horologe.cluster import NotMasterError
from horologe.cluster.consumer_groups import progress_key
from horologe.cluster.schedule_apply import CREATE, PAUSE, RESUME
from horologe.cluster.schedule_state import ScheduleDef, definition, fire_key, mark
from horologe.node.consumers import wire as pull_wire
from horologe.node.quorum_clock import majority
from horologe.node.service import NodeService
from horologe.storage import MessageColumns, MessageExpiredError, MessageId
from horologe.storage.late_policies import DEAD_LETTERED, DROPPED, policy_headers

from . import push
from .service import FIRE_LEAD_MS, SCHEDULE_HORIZON_MS

MS = 1_000_000
S = 1_000_000_000
TIMEOUT_S = 5.0
BASE_SLACK_MS = 5
FRESH_S = 1.5  # the oldest a clock reading is used at (node/quorum_clock.py, fresh_s)
SAMPLES_S = 4.0  # the span of the keep-alive samples a reading's wait is measured against
# How much shorter than asked a lease may come out: the cluster's time lags the true time
# by a reading's transit, more when a link held it (a blackhole, TCP retransmits).
LEASE_LAG_MS = 100
GROUP = "g"
# What a consumer does with a message, by a draw in [0, 1): below each bound, this (above
# the last, nothing: its lease runs out).
SETTLE_CHOICES = ((0.75, "ack"), (0.83, "nack"), (0.9, "release"), (0.95, "extend"))
# A message's lateness policy, drawn for a third of them (--lateness): how late it may
# fall due (0: not at all; an allowance under a second is a wish, as the wheel runs a few
# ms late at times), then what is done with it.
MAX_LATENESS_MS = (0, 30, 300, 1500)
ON_LATE_KINDS = ("drop", "dlq")
LATE_OUTCOMES = {"drop": DROPPED, "dlq": DEAD_LETTERED}  # what a late one becomes, by on_late
LATE_NAMES = {DROPPED: "dropped", DEAD_LETTERED: "dead-lettered"}
# The scheduler's (--schedules): every second, on a topic of its own.
SCHEDULE = ScheduleDef("s", "s", b"tick", "* * * * * *", "UTC")


@dataclass
class Handout:
    consumer: str
    lease_until: int  # its receipt's (or an extend's), by the clock of the master that handed it out
    at_ms: int = 0  # true wall ms it was handed out
    ended_ms: int | None = None  # true wall ms its consumer sent a release or a nack of it


@dataclass
class Produced:
    """An acknowledged message, as the editor knows it."""

    topic: str
    key: str | None
    times: set[int]  # the deliver times it may have now (one, unless a move went unanswered)
    cancelled_ms: int | None = None  # true wall ms a cancel of it was answered as made
    maybe_cancelled: bool = False  # a cancel of it is in flight, or went unanswered
    busy: bool = False  # a cancel or a move of it in flight
    policy: tuple[str, int] | None = None  # --lateness: (on_late, max_lateness ms)


@dataclass
class Pause:
    """A pause of the schedule and the resume after it, by the true clock (ms)."""

    sent_ms: int  # its first sending: it may apply from then on
    floor_ms: int  # the least watermark applied then (Workload.delivered_floor)
    answered_ms: int | None = None  # applied by then
    resume_sent_ms: int | None = None  # the resume's first sending: firings may come back from then
    resume_answered_ms: int | None = None


@dataclass
class Actor:
    name: str
    believed: str
    answered: dict[str, int] = field(default_factory=dict)
    pending: tuple[str, str] | None = None  # (what, node) of its request not yet answered
    timeout_s: float | None = None  # its own, set by a scripted scenario (else the workload's)


class Workload:
    def __init__(self, world, topics: tuple[str, ...]) -> None:
        self.world = world
        self.topics = topics
        names = [n.name for n in world.nodes]
        rng = world.rng
        self.producer = Actor("producer", rng.choice(names))
        self.consumers = [Actor(f"c{i}", rng.choice(names)) for i in (1, 2)]
        self.editor = Actor("editor", rng.choice(names))
        self.admins: list[Actor] = []  # one per forced release asked (release_act)
        scheduling = world.profile.schedules
        self.scheduler = Actor("scheduler", rng.choice(names)) if scheduling else None
        pulled = tuple(t for t in topics if t != push.TOPIC)  # --push: its topic is the push group's
        self.pulled = (*pulled, SCHEDULE.topic) if scheduling else pulled  # the topics consumers pull
        self.pushes = (
            push.Pushes(self, Actor("subscriber", rng.choice(names)), Actor("push", ""))
            if world.profile.push
            else None
        )
        self.fired: dict[int, str] = {}  # fire ms -> the id of its first hand-out
        # --retention: topic -> the true ms its group's progress first applied (note_group)
        self.group_since: dict[str, int] = {}
        self.pauses: list[Pause] = []
        self.unknown_from: int | None = None  # first sending of a pause or resume not answered
        self.unknown_floor: int | None = None  # the least watermark applied then
        self.produced: dict[str, Produced] = {}
        self.bodies: dict[str, str] = {}  # body -> the id of the message produced with it
        self.handed_bodies: dict[str, set[str]] = {}  # id handed out -> the bodies under it
        self.ids: dict[str, tuple[int, int | None]] = {}  # message id -> the entry that applied it
        self.handouts: dict[tuple[str, int], list[Handout]] = {}
        self.acked_ms: dict[tuple[str, int], int] = {}  # (id, attempt) -> when an ack was answered
        self.slack_ms = BASE_SLACK_MS
        self.behind_ms = 0  # the most any node's clock has been behind the true time so far
        self.asymmetry_ms = 0  # half the worst asymmetry of a link's delays so far
        self.slow_aged_ms = 0  # the most a slow oscillator ages a fresh reading short so far
        self._seen: dict[str, deque[tuple[int, float]]] = {}  # what -> (true ms, value): _most_within
        self.sent = 0
        self.handed = 0
        self.timeout_s = TIMEOUT_S  # a scripted scenario may give its clients a shorter one

    # -- running --------------------------------------------------------------------

    def start(self) -> None:
        world = self.world
        world.at(int(0.5 * S), "client", None, self.produce_act)
        for c in self.consumers:
            world.at(int(0.5 * S) + world.rng.randrange(0, 50 * MS), "client", None, self.consume_act, c)
        world.at(int(0.6 * S), "client", None, self.edit_act)
        if self.scheduler is not None:
            world.at(int(0.5 * S) + world.rng.randrange(0, 500 * MS), "client", None, self.schedule_act)
        if self.pushes is not None:
            self.pushes.start()

    @property
    def running(self) -> bool:
        return self.world.phase not in ("pushing", "draining", "done")

    def call(
        self,
        actor: Actor,
        what: str,
        work: Callable[[NodeService], Coroutine],
        answered: Callable[[object], None],
        failed: Callable[[], None] = lambda: None,
    ) -> None:
        """Send ``work(service)`` to the node ``actor`` believes is master; then, once,
        ``answered(result)`` or ``failed()`` (an error, or no answer in time)."""
        world = self.world
        node = world.by_name[actor.believed]
        state = {"done": False}

        def finish(outcome: str, result=None) -> None:
            if state["done"]:
                return
            state["done"] = True
            actor.pending = None
            key = f"{what}:{outcome}"
            actor.answered[key] = actor.answered.get(key, 0) + 1
            if outcome == "ok":
                answered(result)
            else:
                failed()

        def settle(task: asyncio.Task) -> None:  # on the node's loop, as its answer leaves
            if task.cancelled():
                return
            err = task.exception()
            if err is None:
                finish("ok", task.result())
                return
            if isinstance(err, NotMasterError):  # 307 to the master it names, or a 503
                self._redirect(actor, node if err.leader is not None else None)
            finish(type(err).__name__)

        def arrive(incarnation: int) -> bool:
            service = node.service
            if node.incarnation != incarnation or service is None:
                self._redirect(actor, None)
                finish("lost")
                return True
            node.loop.create_task(work(service)).add_done_callback(settle)
            return True

        def give_up() -> bool:
            if state["done"]:
                return False  # answered: no step
            self._redirect(actor, None)
            finish("timeout")
            return True

        actor.pending = (what, node.name)
        world.at(world.rng.randrange(100_000, MS), "loop", node.name, arrive, node.incarnation)
        world.at(int((actor.timeout_s or self.timeout_s) * S), "client", None, give_up)

    async def _master_check(self, service: NodeService) -> None:
        """The master check a route makes before its handler (node/http/route_table.py)."""
        if not self.world.profile.hold:
            service.require_master()
            return
        served = service.hold.counts["served"]
        await service.hold.check()
        if service.hold.counts["served"] > served:
            self.world.count("requests held, then served")

    def _redirect(self, actor: Actor, node) -> None:
        """To the master ``node`` names (as its 307 would), else to another node at random
        (as the SDK goes on to the next after a 503, a refused connection or a timeout)."""
        world = self.world
        leader = None
        if node is not None and node.raft is not None and node.raft.status.leader:
            leader = world.by_address.get(node.raft.status.leader)
        others = [n for n in world.nodes if n.name != actor.believed]
        actor.believed = (leader or world.rng.choice(others)).name

    # -- the producer ----------------------------------------------------------------

    def produce_act(self) -> None:
        if not self.running:
            return
        world, rng = self.world, self.world.rng
        self.sent += 1
        serial = self.sent
        now = world.clock.wall_ms()
        n = rng.randrange(1, 4)
        topics = [rng.choice(self.topics) for _ in range(n)]
        deliver = [now + rng.randrange(-500, 4000) for _ in range(n)]
        keys = [f"k{serial}.{i}" if rng.random() < 0.5 else None for i in range(n)]
        policies = {}
        if world.profile.lateness:
            for i in range(n):
                if rng.random() < 1 / 3:
                    policies[i] = (rng.choice(ON_LATE_KINDS), rng.choice(MAX_LATENESS_MS))
        cols = MessageColumns(
            topics,
            [f"m{serial}.{i}".encode() for i in range(n)],
            np.array(deliver, dtype=np.int64),
            np.full(n, now, dtype=np.int64),
            keys,
            headers={i: policy_headers(ms, on_late) for i, (on_late, ms) in policies.items()},
        )

        async def produce(service: NodeService) -> list[str]:
            await self._master_check(service)
            return await service.produce(cols)

        def answered(ids) -> None:
            made = list(zip(ids, topics, deliver, strict=True))
            world.acked_messages([(mid, self.ids[mid], t, at) for mid, t, at in made])
            for i, ((mid, t, at), key) in enumerate(zip(made, cols.keys, strict=True)):
                self.produced[mid] = Produced(t, key, {at}, policy=policies.get(i))
                self.bodies[cols.bodies[i].decode()] = mid

        self.call(self.producer, "produce", produce, answered)
        world.at(rng.randrange(2 * MS, 40 * MS), "client", None, self.produce_act)

    # -- consumers -----------------------------------------------------------------

    def consume_act(self, c: Actor) -> None:
        if not self.running:
            return
        world, rng = self.world, self.world.rng
        topic = rng.choice(self.pulled)
        most = rng.randrange(1, 9)
        wait_ms = rng.choice((0, 50, 200))
        visibility_ms = rng.randrange(300, 1_500)
        sent_ms = world.clock.wall_ms()

        async def pull(service: NodeService) -> dict:
            await self._master_check(service)
            pulled = await service.consumers.pull(GROUP, topic, None, most, wait_ms, visibility_ms)
            answer = pull_wire.as_json(pulled, service.clock())
            where = f"{service.config.node_id} at {answer['clock_ms']}"
            self.check_pull(c, answer["messages"], sent_ms, visibility_ms, where)  # as the answer leaves
            return answer

        def answered(answer: dict) -> None:
            self.after_pull(c, answer["messages"], visibility_ms)
            world.at(rng.randrange(1 * MS, 30 * MS), "client", None, self.consume_act, c)

        def failed() -> None:
            world.at(rng.randrange(1 * MS, 30 * MS), "client", None, self.consume_act, c)

        self.call(c, "pull", pull, answered, failed)

    def check_pull(
        self, c: Actor, messages: list[dict], sent_ms: int, visibility_ms: int, on: str, early_ms: int = 0
    ) -> None:
        """``on``: the node that answers, and its clock; ``early_ms``: how long before its
        time a message may be leased (a push group's, sim/push.py)."""
        world = self.world
        now = world.clock.wall_ms()
        slack = self.slack_ms
        for m in messages:
            key = (m["id"], m["attempt"])
            where = f"{m['id']} attempt {m['attempt']} to {c.name} at {now}"
            if now < m["deliver_at"] - slack - early_ms:
                allowed = f"slack {slack} ms, ahead {early_ms} ms"
                world.violate("handed-out-early", f"{where}: due at {m['deliver_at']} ({allowed})")
            if m["topic"] == SCHEDULE.topic and m["attempt"] == 0:
                self.check_firing(m, where)
            made = self.produced.get(m["id"])
            if made is not None and made.cancelled_ms is not None:
                world.violate(
                    "cancelled-handed-out", f"{where}: its cancel was answered at {made.cancelled_ms}"
                )
            if made is not None and m["attempt"] == 0 and m["deliver_at"] not in made.times:
                world.violate(
                    "rescheduled-at-old-time",
                    f"{where}: fired for {m['deliver_at']}, moved to {sorted(made.times)}",
                )
            acked = self.acked_ms.get(key)
            if acked is not None and acked < sent_ms:
                world.violate(
                    "acked-handed-out-again", f"{where}, pulled at {sent_ms}: its ack was answered at {acked}"
                )
            for h in self.handouts.get(key, ()):
                if now < h.lease_until - slack and (h.ended_ms is None or h.ended_ms > now):
                    world.violate(
                        "handed-out-inside-a-lease",
                        f"{where}: {h.consumer} holds it until {h.lease_until} (slack {slack} ms)",
                    )
            until = lease_end(m["receipt"])
            if until < sent_ms + visibility_ms - LEASE_LAG_MS - self.lease_lag_ms:
                world.violate(
                    "lease-as-asked",
                    f"{where}: leased until {until}, pulled at {sent_ms} for {visibility_ms} ms "
                    f"(a clock behind by up to {self.behind_ms} ms, links' asymmetry {self.asymmetry_ms} ms, "
                    f"a slow oscillator's ageing {self.slow_aged_ms} ms)",
                )
            self.handouts.setdefault(key, []).append(Handout(c.name, until, now))
            self.handed_bodies.setdefault(m["id"], set()).add(m.get("body"))
            made = self.bodies.get(m.get("body"))
            if made is not None and made != m["id"]:
                world.violate("retry-id", f"{where}: the message produced with its body is {made}")
            self.handed += 1
        if messages:
            got = " ".join(f"{m['id']}/{m['attempt']}" for m in messages)
            world.note(f"{c.name} pulled on {on} (sent {sent_ms}, {visibility_ms} ms): {got}")

    def after_pull(self, c: Actor, messages: list[dict], visibility_ms: int) -> None:
        """What the consumer does with each message: ack, nack, release, extend (then ack)
        or nothing."""
        rng = self.world.rng
        plans: dict[str, list[dict]] = {"ack": [], "nack": [], "release": [], "extend": []}
        for m in messages:
            r = rng.random()
            what = next((w for below, w in SETTLE_CHOICES if r < below), None)
            if what is not None:
                plans[what].append(m)
        for what, ms in plans.items():
            if ms:
                late = 1.3 if what == "ack" else 0.8
                delay = rng.randrange(0, int(visibility_ms * late) + 1) * MS
                self.world.at(delay, "client", None, self.settle_act, c, what, ms)

    def settle_act(self, c: Actor, what: str, messages: list[dict]) -> None:
        world = self.world
        receipts = [m["receipt"] for m in messages]
        keys = [(m["id"], m["attempt"]) for m in messages]
        if what in ("nack", "release"):  # the lease ends (with the request, as far as it knows)
            self.end_leases(c.name, keys)

        visibility_ms = world.rng.randrange(1_500, 3_000)  # an extend's: past the pull's lease

        topic = messages[0]["topic"]  # a pull's: a retry's copy names the topic it was pulled by

        async def settle(service: NodeService):
            await self._master_check(service)
            if what == "ack":
                return await service.consumers.ack(GROUP, topic, receipts)
            if what == "nack":
                return await service.consumers.nack(GROUP, topic, receipts)
            if what == "extend":
                return await service.consumers.extend(GROUP, topic, receipts, visibility_ms)
            return await service.consumers.release(GROUP, topic, receipts)

        world.note(f"{c.name} sends {what} of " + " ".join(f"{i}/{a}" for i, a in keys))

        def answered(_result) -> None:
            world.note(f"{c.name}: {what} answered ({_result})")
            if what == "ack":
                now = world.clock.wall_ms()
                for key in keys:
                    self.acked_ms.setdefault(key, now)
            elif what == "extend":
                self.extended(c, keys, *_result)
                # a long task: done in the second half of its extended lease
                delay = world.rng.randrange(visibility_ms // 2, visibility_ms) * MS
                world.at(delay, "client", None, self.settle_act, c, "ack", messages)

        self.call(c, what, settle, answered)

    def end_leases(self, consumer: str, keys: list[tuple[str, int]]) -> None:
        """``consumer`` sent a nack, a release or a give-back of ``keys`` (id, attempt): its
        hand-outs of them end now, as far as it knows."""
        now = self.world.clock.wall_ms()
        for key in keys:
            for h in self.handouts.get(key, ()):
                if h.consumer == consumer and h.ended_ms is None:
                    h.ended_ms = now

    def extended(self, c: Actor, keys: list[tuple[str, int]], count: int, until: int) -> None:
        """An extend answered: when it renewed every lease it named, each was held from
        ``c``'s hand-out until ``until``, so no other consumer got one of those messages in
        between; and each bounds later hand-outs until then. (When it renewed only some,
        which is not known: nothing is checked.)"""
        if count != len(keys):
            return
        for key in keys:
            mine = [h for h in self.handouts.get(key, ()) if h.consumer == c.name]
            if not mine:
                continue
            h = mine[-1]
            others = [
                o
                for o in self.handouts[key]
                if o.consumer != c.name and h.at_ms < o.at_ms < until - self.slack_ms
            ]
            if others:
                self.world.violate(
                    "extended-a-lost-lease",
                    f"{key[0]} attempt {key[1]}: {c.name}'s lease extended to {until}, "
                    f"handed to {others[0].consumer} at {others[0].at_ms} since",
                )
            h.lease_until = max(h.lease_until, until)

    # -- the editor: cancels and moves ------------------------------------------------------

    def edit_act(self) -> None:
        """Every 10-60 ms, a message not due for 200 ms yet: cancel it (a third) or move it
        to -0.2..3 s from now, by id or, for a keyed one, by key."""
        if not self.running:
            return
        world, rng = self.world, self.world.rng
        world.at(rng.randrange(10 * MS, 60 * MS), "client", None, self.edit_act)
        now = world.clock.wall_ms()
        ahead = [
            mid
            for mid, p in self.produced.items()
            if not p.busy and p.cancelled_ms is None and not p.maybe_cancelled and min(p.times) > now + 200
        ]
        if not ahead:
            return
        mid = rng.choice(ahead)
        made = self.produced[mid]
        by_key = made.key is not None and rng.random() < 0.5
        ids, keys = ([], [(made.topic, made.key)]) if by_key else ([mid], [])
        move = rng.random() >= 1 / 3
        new_at = now + rng.randrange(-200, 3000)
        made.busy = True
        # Made or not, a request in flight may have taken effect: until its answer says
        # otherwise, the message may fire at its new time, or never.
        before = set(made.times)
        if move:
            made.times.add(new_at)
        else:
            made.maybe_cancelled = True

        async def edit(service: NodeService):
            await self._master_check(service)
            if move:
                return await service.reschedule(ids, keys, [new_at])
            return await service.cancel(ids, keys)

        what = "reschedule" if move else "cancel"
        world.note(f"editor sends {what} of {mid}" + " by key" * by_key + f" to {new_at}" * move)

        def answered(result) -> None:
            made.busy = False
            ((state, named),) = result
            if named != mid:
                world.violate(
                    "edit-names-its-message",
                    f"{what} of {mid} ({'by key' if by_key else 'by id'}) named {named}",
                )
            world.note(f"editor: {what} of {mid} answered {state}")
            if move:
                made.times = {new_at} if state == "scheduled" else before  # its state before the move
                return
            made.maybe_cancelled = False
            if state != "cancelled":  # its state after: delivered, or never stored
                return
            made.cancelled_ms = world.clock.wall_ms()
            if any(k[0] == mid for k in self.handouts):
                world.violate(
                    "cancelled-handed-out", f"{mid}: cancelled at {made.cancelled_ms}, handed out before"
                )

        def failed() -> None:
            made.busy = False  # it may or may not have been made: the times stay possible

        self.call(self.editor, what, edit, answered, failed)

    def owed(self, topic: str, due_ms: int) -> set[str]:
        """The messages of ``topic`` owed a place in every ready log by ``due_ms``: each of
        its possible times before it, and no cancel that may have been made."""
        return {
            mid
            for mid, p in self.produced.items()
            if p.topic == topic and p.cancelled_ms is None and not p.maybe_cancelled and max(p.times) < due_ms
        }

    def late_outcomes(self, store, topic: str) -> tuple[dict[str, tuple[int, int]], set[str]]:
        """The messages of ``topic`` with a lateness policy that ``store`` recorded as
        dropped or dead-lettered (where each lives now: a moved one's copy): id -> (kind, ms
        late); and those whose hour retention removed (``--retention``), which no longer tell."""
        outcomes, removed = {}, set()
        for mid, p in self.produced.items():
            if p.topic != topic or p.policy is None:
                continue
            try:
                outcome = store.late_outcome(store.current_place(MessageId.parse(mid)))
            except MessageExpiredError:
                removed.add(mid)
                continue
            if outcome is not None:
                outcomes[mid] = outcome
        return outcomes, removed

    def note_group(self, store) -> None:
        """With ``--retention``, after each apply on any node: when the group's progress on
        each topic it pulls first applied (with ``--push``, the push group's on its topic).
        Retention trims what a topic with no group yet delivered, whoever will read it
        (cluster/retention.py), so until then a message may be delivered and trimmed unseen."""
        readers = [(GROUP, t) for t in self.pulled] + [(push.GROUP, push.TOPIC)] * (self.pushes is not None)
        for group, topic in readers:
            if topic not in self.group_since and store.meta(progress_key(group, topic)) is not None:
                self.group_since[topic] = self.world.clock.wall_ms()

    def trimmed_unseen(self, topic: str, at: int) -> bool:
        """Whether a message of ``topic`` due at ``at`` may have been delivered (by the fire
        lead and the slack before ``at``) and trimmed before its group had progress on it."""
        since = self.group_since.get(topic)
        return since is None or at - FIRE_LEAD_MS - self.slack_ms < since

    def handed_out(self) -> set[str]:
        """The ids of the messages a pull (or the push group's lease) handed out, as its
        answer left its node."""
        return {mid for mid, _attempt in self.handouts}

    def lateness_problems(
        self, late: dict[str, tuple[int, int]], fired: list[tuple[str, int, int]]
    ) -> list[str]:
        """What breaks the lateness policies (``--lateness``), by the clock of the entry
        that decided: in ``late`` (of :meth:`late_outcomes`) one dropped or
        dead-lettered within its allowance, or not as its policy says; in ``fired``, the
        ready log's (id, deliver_at, delivered_at), one late outcome delivered too, or one
        delivered past its allowance."""
        problems = []
        for mid, (kind, late_by) in sorted(late.items()):
            on_late, allowance = self.produced[mid].policy
            if late_by <= allowance or kind != LATE_OUTCOMES[on_late]:
                problems.append(
                    f"{mid} {LATE_NAMES[kind]} {late_by} ms late; its policy: {on_late} past {allowance} ms"
                )
        for mid, due, at in fired:
            if mid in late:
                problems.append(f"{mid} {LATE_NAMES[late[mid][0]]} and delivered at {at}")
            p = self.produced.get(mid)
            if p is not None and p.policy is not None and at - due > p.policy[1]:
                problems.append(f"{mid} delivered {at - due} ms late, past its allowance of {p.policy[1]} ms")
        return problems

    def retry_id_problems(self) -> list[str]:
        """Each message handed out under the id of the message produced with its body (each
        body is its own), whatever its attempt: a retry answers to its first's id
        (docs/api.md), and no id stands for two bodies. (:meth:`check_pull` checks those
        whose produce was answered when handed out.)"""
        problems = []
        for mid, bodies in sorted(self.handed_bodies.items()):
            if len(bodies) > 1:
                problems.append(f"{mid} handed out with {len(bodies)} bodies")
            made = {self.bodies[b] for b in bodies if b in self.bodies}
            if made - {mid}:
                problems.append(f"{mid} handed out for the message produced as {sorted(made)}")
        return problems

    def cancelled(self) -> list[str]:
        """The messages a cancel was answered as made for."""
        return [mid for mid, p in self.produced.items() if p.cancelled_ms is not None]

    # -- the scheduler -----------------------------------------------------------------

    def schedule_act(self, op: str = CREATE, first: tuple[int, int] | None = None) -> None:
        """Ask ``op`` of ``SCHEDULE`` (create, pause, resume), again after a failure (of
        the master the refusal names, or of another node) until an answer comes; then
        the next: a pause 1-2.5 s after a create or a resume, a resume 0.3-1.5 s after a
        pause. ``first``: the op's first sending, and the least watermark applied then."""
        if not self.running:
            return
        world = self.world
        if first is None:
            first = (world.clock.wall_ms(), self.delivered_floor())
            if op == PAUSE:
                self.pauses.append(Pause(*first))
            elif op == RESUME:
                self.pauses[-1].resume_sent_ms = first[0]

        fate = {"past_check": False, "ended": False}

        async def ask(service: NodeService):
            try:
                await self._master_check(service)
                fate["past_check"] = True
                if op == CREATE:
                    return await service.schedules.create(SCHEDULE)
                if op == PAUSE:
                    return await service.schedules.pause(SCHEDULE.name)
                return await service.schedules.resume(SCHEDULE.name)
            finally:
                fate["ended"] = True

        def answered(result) -> None:
            now = world.clock.wall_ms()
            world.note(f"scheduler: {op} answered")
            world.count(f"schedule {op} answered")
            if op == PAUSE:
                self.pauses[-1].answered_ms = now
            elif op == RESUME:
                self.pauses[-1].resume_answered_ms = now
            then, (low, high) = (RESUME, (300, 1_500)) if op == PAUSE else (PAUSE, (1_000, 2_500))
            world.at(world.rng.randrange(low * MS, high * MS), "client", None, self.schedule_act, then)

        def failed() -> None:
            # Refused by the master check, it was not made; past it, or not ended (a
            # timeout, a node that crashed with it), it may have been, or be made later.
            unknown = fate["past_check"] or not fate["ended"]
            if op != CREATE and unknown and self.unknown_from is None:
                self.unknown_from, self.unknown_floor = first
            later = world.rng.randrange(50 * MS, 200 * MS)
            world.at(later, "client", None, self.schedule_act, op, first)

        world.note(f"scheduler asks {self.scheduler.believed} to {op} {SCHEDULE.name}")
        self.call(self.scheduler, "schedule", ask, answered, failed)

    def check_firing(self, m: dict, where: str) -> None:
        """A firing's first hand-out: due at a whole second, keyed by it, and the only
        message handed out for that fire time."""
        at = m["deliver_at"]
        if at % 1000 or m.get("key") != fire_key(SCHEDULE.name, at):
            self.world.violate("schedule-fired-off-plan", f"{where}: due at {at}, keyed {m.get('key')!r}")
        self.world.count("firings handed out")
        first = self.fired.setdefault(at, m["id"])
        if first != m["id"]:
            self.world.violate("schedule-fired-twice", f"{where}: fire time {at} was handed out as {first}")
        paused = self.paused_over(at)
        if paused is not None:
            self.world.violate("schedule-fired-while-paused", f"{where}: due at {at}, {paused}")

    @property
    def lease_lag_ms(self) -> int:
        """How far short of its asked end a lease may be stamped so far, beyond
        ``LEASE_LAG_MS``: a clock behind, a link's asymmetry, a slow oscillator's ageing."""
        return self.behind_ms + self.asymmetry_ms + self.slow_aged_ms

    def paused_over(self, at: int) -> str | None:
        """How fire time ``at`` is known paused over: after a pause was answered (and the
        slack, and the fire lead: a firing the wheel fired before the pause stays
        delivered) and before its resume was first sent (less the lag of
        ``lease-as-asked``), and before any pause or resume went unanswered; None if it
        is not."""
        lag = LEASE_LAG_MS + self.lease_lag_ms
        ahead = self.slack_ms + FIRE_LEAD_MS
        unknown = math.inf if self.unknown_from is None else self.unknown_from
        for p in self.pauses:
            resumed = math.inf if p.resume_sent_ms is None else p.resume_sent_ms
            if p.answered_ms is not None and p.answered_ms + ahead < at < min(resumed, unknown) - lag:
                return (
                    f"paused at {p.answered_ms} (slack {self.slack_ms} ms, fire lead {FIRE_LEAD_MS} ms), "
                    f"resumed at {p.resume_sent_ms} (lag {lag} ms)"
                )
        return None

    def delivered_floor(self) -> int:
        """The least watermark a running node applied (ms): a pause applied from now on
        may cancel any firing due after it, as it was not delivered yet (a new master's
        wheel may lag the clock for a while)."""
        return self.world.least_watermark_ms(n for n in self.world.nodes if n.raft is not None)

    def may_skip(self, at: int) -> bool:
        """Whether a pause may have skipped fire time ``at``: from its first sending (less
        the slack), or the least watermark applied then, to its resume's answer (and the
        slack, and the horizon: a short pause resumes from the mark that was planned
        before it); or past a pause or resume not answered."""
        slack = self.slack_ms
        if self.unknown_from is not None and at > min(self.unknown_from - slack, self.unknown_floor):
            return True
        for p in self.pauses:
            resumed = p.resume_answered_ms
            end = math.inf if resumed is None else resumed + slack + SCHEDULE_HORIZON_MS
            if min(p.sent_ms - slack, p.floor_ms) < at <= end:
                return True
        return False

    def firings_problem(self, stores: dict, ws_ms: int) -> tuple[str, str] | None:
        """At the end, every node at the same applied index: (invariant, detail) of the
        first node whose ready log of the schedule's topic does not hold each fire time
        planned (after the create's clock, up to the committed mark) and due before
        ``ws_ms`` once, and no other; None when all do."""
        meta = next(iter(stores.values())).current_meta
        d, m = definition(meta, SCHEDULE.name), mark(meta, SCHEDULE.name)
        if d is None or m is None:
            planned, plan = set(), "never created"
        else:
            planned = set(range((d.created_at // 1000 + 1) * 1000, m.mark + 1, 1000))
            plan = f"created at {d.created_at}, planned until {m.mark}"
        owed = {t for t in planned if t < ws_ms and not self.may_skip(t)}
        if self.world.profile.retention:  # a firing handed out, or not yet read by the group, may be trimmed
            owed = {t for t in owed if t not in self.fired and not self.trimmed_unseen(SCHEDULE.topic, t)}
        for name, store in stores.items():
            fired = Counter(store.read_ready(SCHEDULE.topic)["deliver_at_ms"].tolist())
            where = f"{name}'s ready log of {SCHEDULE.topic!r} ({plan}, due before {ws_ms})"
            twice = sorted(t for t, n in fired.items() if n > 1)
            if twice:
                return "schedule-fired-twice", f"{where}: fire times {twice[:10]} more than once"
            if owed - fired.keys():
                return "schedule-missed", f"{where}: fire times {sorted(owed - fired.keys())[:10]} not in it"
            if fired.keys() - planned:
                return "schedule-fired-off-plan", f"{where}: fire times {sorted(fired.keys() - planned)[:10]}"
            for at in sorted(fired):
                paused = self.paused_over(at)
                if paused is not None:
                    return "schedule-fired-while-paused", f"{where}: fire time {at}, {paused}"
        self.world.counts["schedule firings in the ready logs"] = len(owed)
        return None

    # -- an admin ---------------------------------------------------------------------

    def release_act(self, times: int, believed: str) -> None:
        """A forced release of the master (``POST /admin/release-master``, as
        node/http/admin.py calls it), ``times`` in a row, each asked once the one before
        answered; one refused or not answered is asked again (of the master it names, else
        of another node), up to 10 tries in all."""
        admin = Actor("admin", believed)
        self.admins.append(admin)
        left = {"times": times, "tries": 10}
        world = self.world

        async def release(service: NodeService) -> dict:
            return await service.handover.release(None)

        def ask() -> None:
            if not self.running or left["times"] == 0 or left["tries"] == 0:
                return
            left["tries"] -= 1
            world.note(f"admin asks {admin.believed} to release the master")
            self.call(admin, "release-master", release, answered, failed)

        def answered(result: dict) -> None:
            world.note(f"released: {result}")
            left["times"] -= 1
            world.at(world.rng.randrange(0, 300 * MS), "client", None, ask)

        def failed() -> None:
            world.note("admin: release not made (refused, lost or timed out: the run's answers count each)")
            world.at(world.rng.randrange(10 * MS, 200 * MS), "client", None, ask)

        ask()

    # -- the clocks' slack ---------------------------------------------------------------

    def track_clocks(self) -> None:
        """After every step: the most the cluster's time may lead the true time so far."""
        world = self.world
        true = world.clock.wall_ms()
        delay = world.network.delay
        # A node's reading stays fresh at its peers for FRESH_S after it arrives: a node
        # stopped while its clock was ahead, or one whose clock came back, counts as ahead
        # until its last such reading aged out. So each node counts at the most it was
        # ahead within that window (and the slowest link's transit) before now.
        window_ms = int(FRESH_S * 1000) + max((b + j for b, j in delay.values()), default=0) // MS
        now = {n.name: n.wall_ms() - true for n in world.nodes}
        ahead = sorted((self._most_within(name, a, true, window_ms) for name, a in now.items()), reverse=True)
        kth = ahead[majority(len(ahead)) - 1]
        self.behind_ms = max(self.behind_ms, -min(now.values()))
        skew = max((abs(d[0] - delay.get((b, a), d)[0]) for (a, b), d in delay.items()), default=0)
        self.asymmetry_ms = max(self.asymmetry_ms, skew // (2 * MS))
        # a reading is aged on the receiver's monotonic clock, for up to FRESH_S, and by its
        # wait beyond the quickest of the last samples (4 s of them: two monotonic clocks'
        # difference): a drifting oscillator ages it ahead (cluster/raft/peer_clocks.py),
        # and a slow one ages it short, by its rate times the age (a master whose
        # oscillator runs 20% slow stamps leases by a quorum time that lags that much).
        # Samples and readings taken while it drifted stay that long after it stops (seed
        # 5645 with 5 nodes, --service --membership --power-loss --out-of-order: a drift
        # that ended 0.4 s before a step of +500 ms, a lease handed out 509 ms early)
        drift_now = max(abs(n.drift.rate) for n in world.nodes)
        drift = self._most_within("drift", drift_now, true, int((FRESH_S + SAMPLES_S) * 1000))
        slow = max(0.0, -min(n.drift.rate for n in world.nodes))
        self.slow_aged_ms = max(self.slow_aged_ms, int(slow * FRESH_S * 1000))
        # a monotonic clock stepped ahead (libfaketime; Linux never steps one) by less than
        # the freshness window ages every reading it holds by the step, as a pause would
        # (docs/cluster.md, Known limits); a larger step leaves them stale (sim/world.py)
        stepped = max(n.stepped_ahead_ms for n in world.nodes)
        aged = int(drift * (FRESH_S + SAMPLES_S) * 1000) + stepped
        slack = BASE_SLACK_MS + max(0, kth) + self.asymmetry_ms + aged
        if slack > self.slack_ms:
            self.slack_ms = slack

    def _most_within(self, what: str, value, true: int, window_ms: int):
        """The most ``what`` was at any moment of the last ``window_ms`` (``value`` now; a
        node's clock ahead, or the fastest drift): a sliding maximum, of (true ms, value)
        with later larger ones dropping the smaller before them."""
        seen = self._seen.setdefault(what, deque())
        while seen and seen[-1][1] <= value:
            seen.pop()
        seen.append((true, value))
        while seen[0][0] < true - window_ms:
            seen.popleft()
        return seen[0][1]

    def answers(self) -> dict[str, int]:
        """How the requests ended, by what and how (ok, lost, timeout, an error's name);
        ``handed out``: messages pulled."""
        out: dict[str, int] = {"handed out": self.handed, "slack ms": self.slack_ms}
        scheduler = () if self.scheduler is None else (self.scheduler,)
        subscriber = () if self.pushes is None else (self.pushes.subscriber,)
        for actor in (self.producer, *self.consumers, self.editor, *scheduler, *subscriber, *self.admins):
            for outcome, n in actor.answered.items():
                out[outcome] = out.get(outcome, 0) + n
        return dict(sorted(out.items()))
