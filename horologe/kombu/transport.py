"""A kombu virtual transport over Horologe: Celery's delayed tasks wait in the cluster.

A queue is a topic, consumed by one group (named after the queue) that every worker of the
queue shares. Publishing a message produces it with the task's ``eta`` header as its
``deliver_at`` (to the ms; none, or past: now), under the key
``celery:{task id}:{retries}`` (``...:r{n}`` for a task's ``n``-th replacement by
``Task.replace``, which keeps its id): a publish resent across a failover is stored once,
a retry or a replacement is a message of its own. The whole kombu message is the body.
Workers pull only what is due and only as many as Celery's prefetch allows (a task comes
without its eta, kept in the header ``horologe_eta``: Celery would take a task with an eta
past its prefetch limit); each hand-out is leased (``visibility_timeout``), and the lease
is replicated, so no other worker gets the task while it holds it, even across a
failover of the cluster's master. The worker
renews the leases of every task it holds, prefetched or running, every third of the
visibility timeout (horologe/client/lease_keeper.py): the timeout is how long a worker
that died keeps its tasks, not a bound on how long a task may wait in the worker and run.

``basic_ack`` acks (in the background, gathered: horologe/client/acker.py);
``basic_reject(requeue=True)`` and closing a channel release the leases (the task goes to
another worker at once, no attempt counted), never publishing a copy as kombu's base class
would; ``basic_reject(requeue=False)`` moves the task to the group's dead-letter queue
``%DLQ%<queue>``, its lease held until the cluster took the nack (sent again across a
failover; if no node takes it, the lease is released and the task handed out again). A
message of the queue's topic whose body is no kombu message (another producer's) is logged
and moved to that dead-letter queue as it is pulled; the worker gets the rest. Fanout
exchanges (remote control, broadcast) are not supported: what is published to one is
dropped, with a warning (once per exchange and channel), rather than in silence. Bindings
are those declared in the publishing process (the cluster keeps none): a task published
to an exchange that none of them routes raises :class:`UnroutableError` rather than
vanish; anything else so published (an event) is dropped with a warning.
"""

from __future__ import annotations

import logging
import os
from queue import Empty
from urllib.parse import unquote

from kombu.transport import virtual
from kombu.transport.virtual.exchange import FanoutExchange
from kombu.utils import json

from horologe.client import Client
from horologe.client.acker import Acker
from horologe.client.errors import (
    CertificateError,
    InvalidRequestError,
    NotFoundError,
    ServerError,
    UnavailableError,
)
from horologe.client.lease_keeper import LeaseKeeper
from horologe.client.limits import MAX_ITEMS
from horologe.client.task_keys import eta_ms, task_key, topic_name

from .options import Options, read_options

log = logging.getLogger(__name__)

DEFAULT_PORT = 8081


def node_urls(url: str) -> list[str]:
    """``horologe://[:TOKEN@]n1:8081,n2:8081`` (or ``https://...`` after ``horologe+``) as
    the nodes' base URLs."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "horologe", url
    web = "https" if scheme == "https" else "http"
    hosts = rest.rpartition("@")[2].split("/", 1)[0]
    out = []
    for host in filter(None, (h.strip() for h in hosts.split(","))):
        out.append(f"{web}://{host if ':' in host else f'{host}:{DEFAULT_PORT}'}")
    if not out:
        raise ValueError(f"no node in broker URL {url!r}: want horologe://host:port[,host:port...]")
    return out


def url_token(url: str) -> str | None:
    """The token of ``horologe://:TOKEN@hosts`` (or ``user:TOKEN@``), if the URL has one."""
    rest = url.partition("://")[2] or url
    creds, at, _ = rest.rpartition("@")
    if not at:
        return None
    return unquote(creds.partition(":")[2] or creds) or None


def client_for(url: str, options: Options) -> Client:
    """A client of the cluster a broker URL names. The token: the URL's, else the
    ``token`` transport option, else ``HOROLOGE_CLIENT_TOKEN``; the CA: the ``ca`` option,
    else ``HOROLOGE_CA``."""
    token = url_token(url) or options.token or os.environ.get("HOROLOGE_CLIENT_TOKEN")
    if not token:
        raise ValueError(
            "no Horologe token: give horologe://:TOKEN@..., the token option, or HOROLOGE_CLIENT_TOKEN"
        )
    ca = options.ca or os.environ.get("HOROLOGE_CA")
    return Client(node_urls(url), token, ca=ca, timeout=options.timeout, retry_s=options.retry_s)


class NotKombuMessage(ValueError):
    """A message of a queue's topic whose body is no kombu message (another producer's)."""


def _kombu_message(body: bytes, channel) -> dict:
    """``body`` as the kombu message it holds (its JSON object); NotKombuMessage, saying
    why, when it holds none: kombu would fail to read it (its ``properties`` and
    ``delivery_info`` objects, a body that its ``body_encoding`` decodes)."""
    try:
        payload = json.loads(body)
    except ValueError as e:  # not UTF-8 either
        raise NotKombuMessage(f"not JSON: {e}") from None
    if not isinstance(payload, dict):
        raise NotKombuMessage(f"JSON {type(payload).__name__}, not an object")
    props = payload.get("properties")
    if not isinstance(props, dict) or not isinstance(props.get("delivery_info", {}), dict):
        raise NotKombuMessage("no properties object")
    if payload.get("body"):
        try:
            channel.decode_body(payload["body"], props.get("body_encoding"))
        except Exception as e:  # noqa: BLE001 - whatever the codec raises: kombu would raise it too
            raise NotKombuMessage(f"a body its body_encoding does not decode: {e!r}") from None
    return payload


class QoS(virtual.QoS):
    def reject(self, delivery_tag, requeue=False):
        """``requeue``: release the lease (another worker gets it at once); else the
        group's dead-letter queue, now."""
        message = self._delivered.get(delivery_tag)
        if message is not None:
            if requeue:
                self.channel._restore(message)
            else:
                self.channel._dead_letter(message)
        self._quick_ack(delivery_tag)

    def ack(self, delivery_tag):
        message = self._delivered.get(delivery_tag)
        if message is not None:
            self.channel._ack(message)
        super().ack(delivery_tag)

    def restore_unacked(self):
        """At close: release every lease not acked, one call per queue (never a copy)."""
        self._flush()
        messages = [m for tag, m in self._delivered.items() if tag not in self._dirty]
        self._delivered.clear()
        self.channel._release(messages)
        return []


class DroppedBroadcast(FanoutExchange):
    """A fanout exchange, which this transport has not: Celery's remote control
    (``app.control.revoke``, ``inspect``, ``ping``) and broadcasts publish to one and would
    see their message vanish without a word."""

    def deliver(self, message, exchange, routing_key, **kwargs) -> None:
        self.channel.dropped(
            exchange,
            f"dropped what was published to the fanout exchange {exchange!r}: the Horologe transport has "
            "no remote control or broadcast (app.control.revoke does nothing here; cancel a task "
            "that waits for its eta or countdown with horologe.kombu.revoke_scheduled(app, task_id))",
        )


class UnroutableError(Exception):
    """A task published to an exchange that no queue declared in this process is bound to
    for its routing key: the transport keeps no bindings in the cluster, so it cannot tell
    which queue the workers bound (declare the queue here too: ``task_queues``)."""


class Channel(virtual.Channel):
    QoS = QoS
    exchange_types = {**virtual.Channel.exchange_types, "fanout": DroppedBroadcast}
    _next_queue = 0

    def __init__(self, connection, **kwargs) -> None:
        super().__init__(connection, **kwargs)
        options = read_options(self.connection.client.transport_options)
        self.prefix = options.topic_prefix
        self.visibility_ms = options.visibility_ms
        self.wait_ms = options.wait_ms
        client = self.connection.client
        self.client = client_for(client.hostname or "", options)
        self.leases = LeaseKeeper(self.client, self.visibility_ms)
        self.acker = Acker(self.client, self.leases.let_go)  # a lease is renewed until its ack is in
        self._no_ack: set[str] = set()  # queues consumed with no_ack (basic_consume)
        self._dropped_to: set[str] = set()  # exchanges warned of (dropped)

    def _topic(self, queue: str) -> str:
        return topic_name(queue, self.prefix)

    # -- publishing ----------------------------------------------------------------------

    def basic_publish(self, message, exchange, routing_key, **kwargs):
        """As kombu's, but a task that no binding here routes is refused, not dropped (kombu
        finds no queue and puts it nowhere); anything else (an event) so published is
        dropped with a warning, once per exchange and channel."""
        if exchange and not isinstance(self.typeof(exchange), DroppedBroadcast):
            if not self._lookup(exchange, routing_key):
                if (message.get("headers") or {}).get("task"):
                    raise UnroutableError(
                        f"no queue declared here is bound to exchange {exchange!r} for routing key "
                        f"{routing_key!r}: declare the queue in the sending app too (task_queues), "
                        "since the Horologe transport keeps no bindings in the cluster"
                    )
                self.dropped(
                    exchange,
                    f"dropped what was published to exchange {exchange!r}: no queue here is bound to it",
                )
                return None
        return super().basic_publish(message, exchange, routing_key, **kwargs)

    def dropped(self, exchange: str, said: str) -> None:
        """Log ``said`` (what was published to ``exchange`` was dropped, and why): once per
        exchange and channel."""
        if exchange not in self._dropped_to:
            self._dropped_to.add(exchange)
            log.warning("%s", said)

    def _put(self, queue, message, **kwargs):
        headers = message.get("headers") or {}
        task_id = headers.get("id")
        tagged = {"celery-task": headers.get("task"), "celery-id": task_id}
        self.client.produce(
            self._topic(queue),
            json.dumps(message),
            deliver_at=eta_ms(headers.get("eta")),
            key=task_key("celery", task_id, headers.get("retries"), headers.get("replaced_task_nesting")),
            headers={k: str(v) for k, v in tagged.items() if v},
        )

    # -- consuming -----------------------------------------------------------------------

    def _get_many(self, queues, timeout=None):
        """One long poll (of one queue, in turn); what it leased goes to the consumers."""
        if not queues:
            raise Empty()
        want = self.qos.can_consume_max_estimate()
        want = 1 if want is None else min(max(want, 1), MAX_ITEMS)
        queue = queues[self._next_queue % len(queues)]
        self._next_queue += 1
        wait_s = self.wait_ms / 1000 if timeout is None else min(timeout, self.wait_ms / 1000)
        topic = self._topic(queue)
        try:
            batch = self.client.pull(
                topic,
                topic,
                max=want,
                wait_ms=int(wait_s * 1000 / len(queues)),
                visibility_ms=self.visibility_ms,
            )
        except UnavailableError:
            raise Empty() from None  # the SDK retried for retry_s: Celery polls again
        if not batch:
            raise Empty()
        no_ack = queue in self._no_ack
        if not no_ack:  # before any is handed over: it may be acked at once
            self.leases.hold(topic, topic, [m.receipt for m in batch])
        done = 0
        try:
            # Celery's solo pool runs each task in here, a busy prefork pool waits in here for
            # a process: the loop goes on meanwhile, and what it holds is renewed.
            with self.leases.handing_over():
                for m in batch:
                    if queue not in self.connection._callbacks:
                        break  # its consumer was cancelled (kombu would reject it on another channel)
                    payload = self._payload_or_dead_letter(m, queue, topic)
                    if payload is not None:
                        self.connection._deliver(payload, queue)
                        if no_ack:  # a consumer that acks nothing: taken as handed over
                            self.acker.ack(topic, topic, m.receipt)
                    done += 1
        finally:  # a consumer cancelled meanwhile, or a callback that raised: the rest given back
            if done < len(batch):
                self.leases.give_back(topic, topic, [m.receipt for m in batch[done:]])

    def drain_events(self, timeout=None, callback=None):
        self.leases.beat()  # the worker's loop goes on (its prefetch full or not): renew
        return super().drain_events(timeout, callback)

    def basic_consume(self, queue, no_ack, callback, consumer_tag, **kwargs):
        (self._no_ack.add if no_ack else self._no_ack.discard)(queue)
        self.leases.consuming(True)
        return super().basic_consume(queue, no_ack, callback, consumer_tag, **kwargs)

    def basic_cancel(self, consumer_tag):
        """kombu's; with no consumer left (Celery's warm shutdown: the worker finishes what
        it runs, its loop silent, before it closes the channel) the leases held stay renewed."""
        out = super().basic_cancel(consumer_tag)
        if not self._consumers:
            self.leases.consuming(False)
        return out

    def basic_get(self, queue, no_ack=False, **kwargs):
        """One message of ``queue`` if one is due, else None (``SimpleQueue.get``, the
        ``rpc://`` result backend's look at a queue): kombu's, with ``no_ack`` passed on."""
        try:
            message = self.Message(self._get_one(queue, no_ack), channel=self)
        except Empty:
            return None
        if not no_ack:
            self.qos.append(message, message.delivery_tag)
        return message

    def _get(self, queue, timeout=None):
        return self._get_one(queue, no_ack=False)

    def _get_one(self, queue, no_ack: bool) -> dict:
        """The next due message of ``queue`` that is a kombu message (those that are not
        go to the dead-letter queue meanwhile); Empty if none is due."""
        topic = self._topic(queue)
        while True:
            try:
                batch = self.client.pull(topic, topic, max=1, wait_ms=0, visibility_ms=self.visibility_ms)
            except UnavailableError:
                raise Empty() from None
            if not batch:
                raise Empty()
            (m,) = batch
            self.leases.hold(topic, topic, [m.receipt])
            payload = self._payload_or_dead_letter(m, queue, topic)
            if payload is not None:
                break
        if no_ack:  # taken as handed over
            self.acker.ack(topic, topic, m.receipt)
        return payload

    def _payload_or_dead_letter(self, m, queue: str, topic: str) -> dict | None:
        """The kombu message ``m`` carries, ready for kombu; or None for a body that is none
        (not JSON, not a JSON object, not the fields a kombu message has): logged, and moved
        to the group's dead-letter queue, as a worker does with a task it cannot run. Its
        lease is held meanwhile."""
        try:
            return self._payload(m, queue, topic)
        except NotKombuMessage as e:
            self.leases.dead_letter_unreadable(topic, topic, m, str(e), "kombu message")
            return None

    def _payload(self, m, queue: str, topic: str) -> dict:
        payload = _kombu_message(m.body, self)
        props = payload["properties"]
        props["delivery_tag"] = m.receipt  # one per hand-out, as SQS's ReceiptHandle
        info = props.setdefault("delivery_info", {})
        # Handed out before: its lease ended or was given back, or it is the copy the cluster
        # made on a nack (attempt; this transport nacks only to the DLQ). A Celery retry is a
        # new message, not redelivered. Celery reads it here
        # (worker_deduplicate_successful_tasks), as kombu's Redis transport sets it.
        redelivered = m.attempt > 0 or m.deliveries > 1
        # The routing key it was published with, as kombu stored it (Celery's retry publishes
        # with it: a queue's name there would route nowhere from a topic exchange's binding)
        info.setdefault("routing_key", queue)
        info.update(
            redelivered=redelivered,
            horologe={
                "topic": topic,
                "group": topic,
                "id": m.id,
                "attempt": m.attempt,
                "deliveries": m.deliveries,
                "deliver_at": m.deliver_at,
                "delivered_at": m.delivered_at,
            },
        )
        payload["redelivered"] = redelivered
        # It is due: handed out with its eta, Celery would schedule it and take it past its
        # prefetch limit (strategy.py raises the limit by one while an eta task waits), so a
        # worker whose processes are busy would go on pulling what falls due. The eta is
        # kept in the header horologe_eta (a task reads it as self.request.horologe_eta).
        headers = payload.get("headers") or {}
        if headers.get("eta"):
            headers["horologe_eta"], headers["eta"] = headers["eta"], None
        return payload

    @staticmethod
    def _where(message) -> tuple[str, str, str]:
        info = message.delivery_info["horologe"]
        return info["topic"], info["group"], message.delivery_tag

    def _ack(self, message) -> None:
        self.acker.ack(*self._where(message))

    def _restore(self, message) -> None:
        """kombu's requeue: release the lease."""
        self._release([message])

    _restore_at_beginning = _restore

    def _release(self, messages: list) -> None:
        by: dict[tuple[str, str], list[str]] = {}
        for message in messages:
            topic, group, receipt = self._where(message)
            by.setdefault((topic, group), []).append(receipt)
        for (topic, group), receipts in by.items():
            self.leases.give_back(topic, group, receipts)

    def _dead_letter(self, message) -> None:
        """kombu's reject without requeue: to the dead-letter queue, the lease held until
        the cluster took it; if it did not (no node for ``retry_s``), logged and released:
        the task is handed out again."""
        topic, group, receipt = self._where(message)
        what = f"message {message.delivery_info['horologe']['id']} of {topic}"
        self.leases.dead_letter(topic, group, [receipt], what)

    def _size(self, queue) -> int:
        """Tasks due and waiting for a worker (not those a worker holds, nor those whose
        countdown or eta has not come)."""
        topic = self._topic(queue)
        return self.client.backlog(topic, topic).waiting

    def _purge(self, queue) -> int:
        """``celery purge``: drop the tasks due and waiting for a worker. Tasks a worker holds
        stay with it; tasks whose countdown or eta has not come stay scheduled (cancel
        those with ``revoke_scheduled``)."""
        topic = self._topic(queue)
        return self.client.purge(topic, topic)

    def _new_queue(self, queue, **kwargs) -> None:
        pass

    def _has_queue(self, queue, **kwargs) -> bool:
        return True

    def _delete(self, queue, *args, **kwargs) -> None:
        pass

    def close(self):
        self.leases.close()  # first: no renewal under what follows
        try:
            if not self.closed:
                self.acker.flush(10)
            super().close()  # gives back what was not acked (_restore)
        finally:
            self.acker.close(10)
            self.client.close()


class Transport(virtual.Transport):
    Channel = Channel
    can_parse_url = True  # a comma list of nodes
    default_port = DEFAULT_PORT
    driver_type = driver_name = "horologe"
    polling_interval = 0.01  # after an empty long poll, or while Celery's prefetch is full
    implements = virtual.Transport.implements.extend(
        asynchronous=False, exchange_type=frozenset({"direct", "topic"}), heartbeats=False
    )
    connection_errors = (*virtual.Transport.connection_errors, UnavailableError, CertificateError)
    # A node's own failure (ServerError: a master halted as its disk filled) is one too: the
    # worker reconnects and pulls again, as from a Redis ResponseError
    channel_errors = (*virtual.Transport.channel_errors, InvalidRequestError, NotFoundError, ServerError)

    def as_uri(self, uri: str, include_password: bool = False, mask: str = "**") -> str:
        """The broker URL as Celery shows it: a list of nodes (which urllib cannot parse),
        the token masked."""
        if include_password or url_token(uri) is None:
            return uri
        scheme, _, rest = uri.partition("://")
        return f"{scheme}://:{mask}@{rest.rpartition('@')[2]}"

    def driver_version(self) -> str:
        from importlib.metadata import version

        return version("horologe")
