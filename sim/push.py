"""A push subscription under the simulator (``--push``): the master's real push worker
(node/push/) sends over the simulated network to one receiver, whose answers are drawn
from the seed; what the receiver gets, and what the push group leases, acks and nacks,
is checked.

- **Subscriber:** from 0.3-0.8 s, puts the subscription of ``GROUP`` on ``TOPIC`` (a
  topic the producer writes to and no pull consumer reads), as ``PUT
  /v1/topics/{topic}/push/{group}`` does, asked again until answered; then puts it again
  with another ``max_in_flight`` every 1-3 s (a new incarnation: the master's worker
  drops the group's open requests and starts it over, giving back what it held for
  later).
- **Network:** each node's worker sends through :class:`SimPushHttp` (``push_http``, a
  ``NodeService`` argument) rather than node/push/client.py's pool. A request reaches the
  receiver 0.1-1 ms after it is sent, whether or not its process lives on; an answer
  reaches the node 0.1-3 ms after the receiver took the request, unless the process that
  sent it has ended. The pool's timeout is the subscription's (``TIMEOUT_MS``).
- **Receiver:** answers 200 (most), 503 (half of them with ``Retry-After: 0``), 500,
  nothing (the request times out), or 200 after the timeout (taken, but the node hears a
  timeout and sends it again later).

Checked, as the pulls' (sim/workload.py), on every lease the push group takes (as it
leaves its node): ``handed-out-early`` (but for the ``AHEAD_MS`` a push group leases
ahead of a message's time), ``acked-handed-out-again`` (the group's ack answered before
the lease was asked), ``handed-out-inside-a-lease`` (a nack or a give-back ends a
lease when sent), ``lease-as-asked``, ``cancelled-handed-out`` and
``rescheduled-at-old-time``. On every push the receiver takes, by the true clock:
``pushed-early``, before its deliver time (less the slack of the cluster's time), and a
cancelled or moved message as for a pull. Once the run recovered (sim/world.py, the
``pushing`` phase, after the producer stopped): every message owed (each of its times
past the least watermark) was taken by the receiver with a 2xx, or nacked at its last
retry level (``push-liveness``, within :func:`settle_s`); at the end, each of those nacked
at the last level is in the group's dead-letter queue (``push-dead-letters``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import orjson

from horologe.cluster.push_state import PushDef
from horologe.node.consumers import wire as pull_wire
from horologe.node.push.client import Answer, Exchange, PushHttp
from horologe.node.push.group import LEASE_MARGIN_MS
from horologe.node.push.worker import CONNECTIONS

if TYPE_CHECKING:
    from .workload import Actor, Workload
    from .world import SimNode

MS = 1_000_000
S = 1_000_000_000
TOPIC = "p"
GROUP = "pg"
RECEIVER = "receiver.sim"
URL = f"http://{RECEIVER}/hook"
SECRET = "simulated-push-secret"
TIMEOUT_MS = 300
LEASE_MS = TIMEOUT_MS + LEASE_MARGIN_MS  # a push's lease (node/push/group.py)
# How the receiver answers, by a draw in [0, 1): below each bound, this.
ANSWERS = ((0.86, "200"), (0.91, "503"), (0.94, "500"), (0.97, "hang"), (1.0, "late"))


def settle_s(retry_levels_ms: tuple[int, ...]) -> float:
    """After the run recovered and the producer stopped: how long every owed message has
    to be taken or dead-lettered. The last message produced falls due (4 s), a request
    open when its master died is pushed again once its lease ends, then a failure's
    retries (every level), with room for an election."""
    return 4.0 + (LEASE_MS + sum(retry_levels_ms) + 4 * TIMEOUT_MS) / 1000 + 4.0


def subscription(max_in_flight: int) -> PushDef:
    return PushDef(TOPIC, GROUP, URL, SECRET, TIMEOUT_MS, max_in_flight, 0, "*")


class SimPushHttp(PushHttp):
    """node/push/client.py's pool, whose requests go to the receiver (:meth:`Pushes.send`)
    rather than over connections: its timeouts, its closing and its answers are its own."""

    def __init__(self, node: SimNode, receiver: Pushes) -> None:
        super().__init__(CONNECTIONS)
        self._node = node
        self._receiver = receiver
        self._sent: set[Exchange] = set()

    def _connect(self, req: Exchange) -> None:  # no connection: the request is sent as it is
        self._sent.add(req)
        req.future.add_done_callback(lambda _f: self._sent.discard(req))
        self._receiver.send(self._node, req)

    async def close(self) -> None:
        await super().close()
        for req in list(self._sent):
            req.timer.cancel()
            req.future.set_result(Answer(None, None, "closed"))


@dataclass
class Taken:
    """A push the receiver took."""

    at_ms: int  # true wall ms
    attempt: int
    answer: str  # one of ANSWERS


@dataclass
class Pushes:
    """The subscriber, the receiver and the checks of ``--push`` (the module docstring)."""

    workload: Workload
    subscriber: Actor  # puts the subscription
    group: Actor  # the push group's leases, as check_pull names their consumer
    leases: dict[str, tuple[str, int]] = field(default_factory=dict)  # receipt -> (id, attempt)
    # id pushed (a retry's, its first's: Workload.retry_id_problems) -> its pushes taken
    taken: dict[str, list[Taken]] = field(default_factory=dict)
    # the ids pushed nacked at the last retry level (a nack made for them)
    last_level: set[str] = field(default_factory=set)
    subscribed: bool = False  # a put was answered

    # -- the subscriber ------------------------------------------------------------------

    def start(self) -> None:
        world = self.workload.world
        world.at(world.rng.randrange(300 * MS, 800 * MS), "client", None, self.subscribe_act)

    def subscribe_act(self) -> None:
        """Put the subscription; once answered, put it again 1-3 s later, until the
        workload stops (the first put is asked until answered, whenever that is: what
        the run owes is pushed only once it exists)."""
        workload = self.workload
        if not workload.running and self.subscribed:
            return
        world = workload.world
        wanted = subscription(world.rng.randrange(1, 9))

        async def put(service):
            await workload._master_check(service)
            return await service.subscriptions.put(wanted)

        def answered(result) -> None:
            self.subscribed = True
            world.note(f"subscriber: put answered {result[0]} (max_in_flight {wanted.max_in_flight})")
            world.count("push subscription puts answered")
            world.at(world.rng.randrange(1 * S, 3 * S), "client", None, self.subscribe_act)

        def failed() -> None:
            world.at(world.rng.randrange(50 * MS, 200 * MS), "client", None, self.subscribe_act)

        workload.call(self.subscriber, "subscribe", put, answered, failed)

    # -- a node's push group, watched ---------------------------------------------------

    def watch(self, service) -> None:
        """Observe what ``service``'s push worker leases, acks, nacks and gives back (its
        consumer's calls: node/push/group.py, ``Consumer``)."""
        consumer = service.push._consumer
        pull, ack, nack, give_back = consumer.pull, consumer.ack, consumer.nack, consumer.give_back
        workload, world = self.workload, self.workload.world
        actor = self.group

        async def leased(group, topic, tags, most, wait_ms, lease_ms, ahead_ms):
            sent_ms = world.clock.wall_ms()
            pulled = await pull(group, topic, tags, most, wait_ms, lease_ms, ahead_ms)
            answer = pull_wire.as_json(pulled, service.clock())
            where = f"{service.config.node_id} at {answer['clock_ms']}"
            workload.check_pull(actor, answer["messages"], sent_ms, lease_ms, where, early_ms=ahead_ms)
            for m in answer["messages"]:
                self.leases[m["receipt"]] = (m["id"], m["attempt"])
            return pulled

        def named(receipts) -> str:
            return " ".join("{}/{}".format(*self.leases[r]) for r in receipts)

        async def acked(group, topic, receipts):
            world.note(f"push group sends ack of {named(receipts)}")
            n = await ack(group, topic, receipts)
            world.note(f"push group: ack of {named(receipts)} answered ({n})")
            now = world.clock.wall_ms()
            for r in receipts:
                workload.acked_ms.setdefault(self.leases[r], now)
            return n

        levels = len(service.config.retry_levels_ms)

        async def nacked(group, topic, receipts, retry_after_ms):
            self._ended(receipts)
            unsent = [r for r in receipts if not self._taken(*self.leases[r])]
            if unsent:  # every request reaches the receiver before it can time out
                world.violate(
                    "push-nacked-unsent",
                    f"nack of {named(unsent)}, never pushed, by {service.config.node_id}",
                )
            world.note(f"push group sends nack of {named(receipts)} (retry after {retry_after_ms} ms)")
            done = await nack(group, topic, receipts, retry_after_ms)
            world.note(f"push group: nack of {named(receipts)} answered ({done})")
            if done["retried"] + done["dead_lettered"] == len(receipts):  # each made, none passed over
                for r in receipts:
                    mid, attempt = self.leases[r]
                    if attempt >= levels:
                        self.last_level.add(mid)
            return done

        def given_back(group, topic, receipts):
            self._ended(receipts)
            world.note(f"push group gives back {named(receipts)}")
            return give_back(group, topic, receipts)

        consumer.pull, consumer.ack, consumer.nack, consumer.give_back = leased, acked, nacked, given_back

    def _ended(self, receipts: list[str]) -> None:
        """A nack or a give-back sent: those leases end (as far as the group knows)."""
        self.workload.end_leases(self.group.name, [self.leases[r] for r in receipts])

    # -- the receiver --------------------------------------------------------------------

    def send(self, node: SimNode, req: Exchange) -> None:
        world = self.workload.world
        world.at(world.rng.randrange(100_000, MS), "client", None, self.arrive, node, node.incarnation, req)

    def arrive(self, node: SimNode, incarnation: int, req: Exchange) -> None:
        workload = self.workload
        world = workload.world
        head, body = req.data.split(b"\r\n\r\n", 1)
        m = orjson.loads(body)
        now = world.clock.wall_ms()
        slack = workload.slack_ms
        where = f"push of {m['id']} attempt {m['attempt']} from {node.name} taken at {now}"
        if now < m["deliver_at"] - slack:
            world.violate("pushed-early", f"{where}: due at {m['deliver_at']} (slack {slack} ms)")
        made = workload.produced.get(m["id"])
        if made is not None and made.cancelled_ms is not None:
            world.violate("cancelled-handed-out", f"{where}: its cancel was answered at {made.cancelled_ms}")
        if made is not None and m["attempt"] == 0 and m["deliver_at"] not in made.times:
            moved = f"{where}: fired for {m['deliver_at']}, moved to {sorted(made.times)}"
            world.violate("rescheduled-at-old-time", moved)
        r = world.rng.random()
        how = next(what for below, what in ANSWERS if r < below)
        self.taken.setdefault(m["id"], []).append(Taken(now, m["attempt"], how))
        world.count(f"pushes answered {how}")
        world.note(f"receiver: {where}, answers {how}")
        if how == "hang":
            return
        if how == "late":
            delay = (TIMEOUT_MS + world.rng.randrange(1, 100)) * MS
            answer = Answer(200)
        else:
            delay = world.rng.randrange(100_000, 3 * MS)
            retry_after = "0" if how == "503" and world.rng.random() < 0.5 else None
            answer = Answer(int(how), retry_after)
        world.at(delay, "loop", node.name, self.answer, node, incarnation, req, answer)

    def answer(self, node: SimNode, incarnation: int, req: Exchange, answer: Answer) -> bool:
        if node.incarnation != incarnation or req.future.done():
            return False  # its process ended, or it timed out: nothing reads it
        req.timer.cancel()
        req.future.set_result(answer)
        return True

    # -- after the run -------------------------------------------------------------------

    def unsettled(self, ws_ms: int) -> list[str]:
        """The messages owed by the least watermark ``ws_ms`` that the receiver has not
        taken with a 2xx and that were not nacked at the last retry level; with
        ``--lateness``, not those with a policy (they may have been dropped); with
        ``--retention``, not those due before the group had progress on the topic
        (retention may have trimmed them unread, ``Workload.trimmed_unseen``)."""
        workload = self.workload
        retention = workload.world.profile.retention
        out = []
        for mid in sorted(workload.owed(TOPIC, ws_ms)):
            made = workload.produced[mid]
            if made.policy is not None or mid in self.last_level:
                continue
            if retention and workload.trimmed_unseen(TOPIC, min(made.times)):
                continue
            if not any(t.answer in ("200", "late") for t in self.taken.get(mid, ())):
                out.append(mid)
        return out

    def _taken(self, pushed: str, attempt: int) -> bool:
        """Whether the receiver took a push of ``pushed`` at ``attempt``."""
        return any(t.attempt == attempt for t in self.taken.get(pushed, ()))
