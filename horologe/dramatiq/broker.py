"""A Dramatiq broker over Horologe: delayed messages wait in the cluster, not in workers.

``dramatiq.set_broker(HorologeBroker(["http://n1:8081", ...], token))``. A queue is a topic,
consumed by one group named after it that every worker shares. ``send_with_options(delay=ms)``
produces the message with ``deliver_after``, under the key ``dramatiq:{message id}:{retries}``
(a retry is a message of its own; a delay below 0 is now), so the worker declares no
delay queue and holds nothing until it is due. A send that no node answers (for the
client's ``retry_s``) raises Dramatiq's ``ConnectionFailed``.

A consumer pulls what is due, at most its prefetch, each leased (``visibility_ms``,
replicated: no other worker gets it while it is held, even across a failover of the
cluster's master), and renews the leases of what it holds, waiting or running, every third
of ``visibility_ms`` (horologe/client/lease_keeper.py): the visibility is how long a
worker that died keeps its messages. ``ack`` acks (in the background, gathered); ``nack``
(a message that failed for good) moves it to ``%DLQ%<queue>`` now, its lease held until
the cluster took it (a nack no node takes raises ``ConnectionFailed``, which Dramatiq's
worker answers by sending it again), as the consumer does with a message of the queue's
topic that Dramatiq cannot decode (another producer's: logged); ``requeue`` and closing
the consumer release the leases of what was not processed. What the worker runs belongs to
the broker, not to one consumer: the renewals go on, and a consumer the worker makes after
an error of the last one's loop acks what that one handed out.
"""

from __future__ import annotations

import threading
import time

import dramatiq
from dramatiq.broker import Broker, Consumer, MessageProxy
from dramatiq.errors import ConnectionFailed, DecodeError, QueueJoinTimeout

from horologe.client import AlreadyDeliveredError, Client, NotFoundError, UnavailableError
from horologe.client.acker import Acker
from horologe.client.lease_keeper import MIN_WORKER_VISIBILITY_MS, LeaseKeeper
from horologe.client.limits import MAX_ITEMS, MAX_PENDING_PAGE, MAX_VISIBILITY_MS, MAX_WAIT_MS
from horologe.client.task_keys import task_key, topic_name

JOIN_POLL_S = 0.1
FULL_WAIT_MS = 100  # a consumer whose worker holds its prefetch looks again this much later


class HorologeBroker(Broker):
    def __init__(
        self,
        urls: list[str],
        token: str,
        *,
        middleware=None,
        topic_prefix: str = "",
        visibility_ms: int = 1_800_000,
        **client_settings,
    ) -> None:
        """``client_settings``: those of :class:`horologe.client.Client` (``ca``, ``retry_s``, ...)."""
        lo, hi = MIN_WORKER_VISIBILITY_MS, MAX_VISIBILITY_MS
        if not (type(visibility_ms) is int and lo <= visibility_ms <= hi):
            raise ValueError(
                f"visibility_ms must be an integer from {lo} to {hi:,} (12 h), got {visibility_ms!r}"
            )
        super().__init__(middleware=middleware)
        self.client = Client(urls, token, **client_settings)
        self.prefix = topic_prefix
        self.visibility_ms = visibility_ms
        self.queues: set[str] = set()
        # What the worker holds outlives a consumer (Dramatiq's worker makes a new one after
        # an error): per topic, the receipts handed out; their renewals; the acks.
        self.running: dict[str, set[str]] = {}
        self._keeper: LeaseKeeper | None = None
        self._acker: Acker | None = None
        self._lock = threading.Lock()  # one consumer thread per queue may make them at once

    def topic(self, queue_name: str) -> str:
        return topic_name(queue_name, self.prefix)

    def declare_queue(self, queue_name: str) -> None:
        """Record the queue; no delay queue is declared, so workers hold no delayed messages."""
        if queue_name not in self.queues:
            self.emit_before("declare_queue", queue_name)
            self.queues.add(queue_name)
            self.emit_after("declare_queue", queue_name)

    def enqueue(self, message: dramatiq.Message, *, delay: int | None = None) -> dramatiq.Message:
        self.declare_queue(message.queue_name)
        self.emit_before("enqueue", message, delay)
        try:
            self.client.produce(
                self.topic(message.queue_name),
                message.encode(),
                deliver_after=max(0, int(delay or 0)),  # a delay below 0: now, as on other brokers
                key=task_key("dramatiq", message.message_id, message.options.get("retries")),
                headers={"dramatiq-actor": message.actor_name, "dramatiq-id": message.message_id},
            )
        except UnavailableError as e:  # no node answered for retry_s: Dramatiq's own error for it
            raise ConnectionFailed(str(e)) from e
        self.emit_after("enqueue", message, delay)
        return message

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 5000) -> Consumer:
        return _Consumer(self, queue_name, prefetch, timeout)

    def get_declared_queues(self) -> set[str]:
        return self.queues.copy()

    def get_declared_delay_queues(self) -> set[str]:
        return set()

    def flush(self, queue_name: str) -> None:
        """Drop the queue's messages: those scheduled (cancelled), then those due and waiting
        for a worker (purged). Messages a worker holds stay with it."""
        topic = self.topic(queue_name)
        while messages := self.client.pending(topic, limit=MAX_PENDING_PAGE).messages:
            for m in messages:
                try:
                    self.client.cancel(m.id)
                except (AlreadyDeliveredError, NotFoundError):
                    pass  # fell due meanwhile: the purge below drops it
        self.client.purge(topic, topic)

    def flush_all(self) -> None:
        """:meth:`flush` every queue declared here."""
        for queue_name in self.get_declared_queues():
            self.flush(queue_name)

    def join(self, queue_name: str, *, timeout: int | None = None) -> None:
        """Wait until the queue holds nothing: nothing scheduled, and every message
        delivered acked. ``timeout``: ms, then :class:`dramatiq.errors.QueueJoinTimeout`."""
        topic = self.topic(queue_name)
        deadline = None if timeout is None else time.monotonic() + timeout / 1000
        while self.client.backlog(topic, topic).unacked or self.client.pending(topic, limit=1).messages:
            if deadline is not None and time.monotonic() > deadline:
                raise QueueJoinTimeout(queue_name)
            time.sleep(JOIN_POLL_S)

    def holding(self) -> tuple[LeaseKeeper, Acker]:
        """The consumers' renewals and acks (made for the first consumer: a publisher has
        neither)."""
        with self._lock:
            if self._keeper is None:
                self._keeper = LeaseKeeper(self.client, self.visibility_ms)
                self._acker = Acker(self.client, self._keeper.let_go)  # renewed until acked
            return self._keeper, self._acker

    def close(self) -> None:
        if self._keeper is not None:
            self._keeper.close()
            self._acker.close(10)
        self.client.close()


class _Handed(MessageProxy):
    """A message as a consumer hands it to the worker, which gives this object back to
    ack, nack or requeue it: the receipt of this hand-out. One message id may be open twice
    (handed out again while the worker still runs it, its lease ended; a retry pulled
    before the first attempt's ack), each settled by its own receipt."""

    def __init__(self, message: dramatiq.Message, receipt: str, redelivered: bool) -> None:
        super().__init__(message)
        self.receipt = receipt
        # As the RabbitMQ broker's proxy says it: handed out before (a lease that ended, or
        # given back), so it may have run already.
        self.redelivered = redelivered


class _Consumer(Consumer):
    def __init__(self, broker: HorologeBroker, queue_name: str, prefetch: int, timeout_ms: int) -> None:
        self.broker = broker
        self.topic = broker.topic(queue_name)
        self.prefetch = min(max(prefetch, 1), MAX_ITEMS)
        # Dramatiq's worker_timeout: how long a pull waits for a message, at most the longest
        # long poll a node takes (the worker's loop then asks again)
        self.timeout_ms = min(max(timeout_ms, 0), MAX_WAIT_MS)
        self.leases, self.acker = broker.holding()
        self.held: list = []  # pulled, not yet handed to the worker
        self.open = broker.running.setdefault(self.topic, set())  # receipts handed out, not settled

    def __next__(self) -> MessageProxy | None:
        self.leases.beat()  # the consumer's loop goes on: what it holds is renewed
        if not self.held:
            room = self.prefetch - len(self.open)
            if room <= 0:  # the worker holds its prefetch: take no more (others may)
                time.sleep(min(self.timeout_ms, FULL_WAIT_MS) / 1000)
                return None
            try:
                self.held = list(
                    self.broker.client.pull(
                        self.topic,
                        self.topic,
                        max=room,
                        wait_ms=self.timeout_ms,
                        visibility_ms=self.broker.visibility_ms,
                    )
                )
            except UnavailableError:
                return None  # the SDK retried across a failover for its retry_s: poll again
            if not self.held:
                return None
            self.leases.hold(self.topic, self.topic, [m.receipt for m in self.held])
        m = self.held.pop(0)
        try:
            message = dramatiq.Message.decode(m.body)
        except DecodeError as e:
            why = e.__cause__ or e
            self.leases.dead_letter_unreadable(
                self.topic, self.topic, m, f"{type(why).__name__}: {why}", "Dramatiq message"
            )
            return None  # the worker goes on: the consumer's loop asks again
        self.open.add(m.receipt)
        return _Handed(message, m.receipt, m.deliveries > 1)

    def ack(self, message) -> None:
        self.open.discard(message.receipt)
        self.acker.ack(self.topic, self.topic, message.receipt)

    def nack(self, message: _Handed) -> None:
        """To the dead-letter queue, the lease held until the cluster took it. One that no
        node took (for the client's ``retry_s``) raises ConnectionFailed, the message still
        this consumer's: Dramatiq's worker sends it again. One the cluster refused is logged
        and the lease released: the message is handed out again."""
        what = f"message {message.message_id} of {self.topic}"
        try:
            self.leases.dead_letter(self.topic, self.topic, [message.receipt], what, raise_unavailable=True)
        except UnavailableError as e:
            raise ConnectionFailed(f"{what} not moved to the dead-letter queue yet: {e}") from e
        self.open.discard(message.receipt)

    def requeue(self, messages) -> None:
        receipts = [m.receipt for m in messages if m.receipt in self.open]
        self.open.difference_update(receipts)
        self.leases.give_back(self.topic, self.topic, receipts)

    def close(self) -> None:
        """Release what was pulled and not handed to the worker; flush the acks. What the
        worker still runs stays the broker's, renewed: a consumer made next acks it."""
        self.leases.give_back(self.topic, self.topic, [m.receipt for m in self.held])
        self.held = []
        self.acker.flush(10)
