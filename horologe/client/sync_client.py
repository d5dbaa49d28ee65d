"""The blocking client: ``Client(["http://127.0.0.1:8081", ...], token=...)``."""

from __future__ import annotations

import functools
from urllib.parse import quote, urlencode

from . import calls, core
from .blocking_http import blocking_http
from .calls import Reply
from .consuming import AHEAD_MS, Subscription, fetch_and_decode, settle_calls
from .core import CHANGE_S
from .errors import HorologeError, InvalidRequestError
from .limits import MAX_ITEMS
from .models import Backlog, Forecast, MessageStatus, PendingPage, PulledBatch, Rescheduled, Scheduled
from .push_subscriptions import PushCalls
from .schedules import ScheduleCalls


class Client(core.ClientSettings, calls.BlockingPool, ScheduleCalls, PushCalls):
    """Talks to any node; follows the master, and retries across failover for ``retry_s``.

    One pool of kept-alive connections per client: make one and reuse it, and
    :meth:`close` it (or use ``with Client(...) as c:``) when done. Safe to share
    between threads.
    """

    def __init__(self, urls, token: str, **settings) -> None:
        """``settings``: admin_token, timeout (s, per request; None: no limit), retry_s (s,
        across failover), ca (PEM file or directory of the CAs to trust on https:// URLs),
        verify (True, or an ``ssl.SSLContext`` that verifies; see :mod:`horologe.client.tls`),
        transport (an httpx transport, e.g. ``httpx.MockTransport`` in tests: calls then go
        through ``httpx.Client``; see :mod:`horologe.client.blocking_http`)."""
        super().__init__(urls, token, **settings)
        self._http = blocking_http(self.timeout, self.verify, self.transport)

    def request(
        self,
        method: str,
        path: str,
        body=None,
        *,
        admin: bool = False,
        resend: bool = True,
        accept: str | None = None,
        timeout: float | None | object = core.CLIENT_TIMEOUT,
    ) -> Reply:
        """Any API call, e.g. ``request("DELETE", f"/v1/messages/{id}")``, following the
        master and retrying like the calls below. Returns the 2xx :class:`Reply`; an error
        answer raises its :class:`HorologeError`. ``admin`` sends the admin token;
        ``resend=False`` for a call that must not be repeated after a timeout; ``accept``
        asks for another answer type than JSON (``calls.MSGPACK``: its body comes decoded)."""
        build = self._http.build
        if timeout is not core.CLIENT_TIMEOUT:  # this call's own (s; None: no limit)
            build = functools.partial(build, timeout=timeout)
        plan = self.plan(build, method, path, body, admin=admin, resend=resend, accept=accept)
        return calls.run_blocking(self._http, plan)

    def _call(self, method: str, path: str, body=None, **options):
        return self.request(method, path, body, **options).body

    # -- producing ----------------------------------------------------------------

    def produce(self, topic: str, body: bytes | str, **options) -> Scheduled:
        """Schedule one message. Options: tags, deliver_at, deliver_after, delay_level, key, headers,
        max_lateness and on_late (what happens if it falls due later than that: deliver, dlq, drop)."""
        msg = core.message_body(topic, body, **options)
        return core.to_scheduled(self._call("POST", "/v1/messages", calls.Msgpack(msg)), topic)

    def produce_batch(self, messages: list[dict]) -> list[Scheduled | HorologeError]:
        """Schedule many; each item is the keyword arguments of :meth:`produce`."""
        bodies = core.batch_bodies(messages)
        res = self._call("POST", "/v1/messages/batch", calls.Msgpack({"messages": bodies}))["results"]
        return core.batch_results(res, bodies)

    def status(self, message_id: str) -> MessageStatus:
        return core.to_status(self._call("GET", f"/v1/messages/{message_id}"))

    def forecast(
        self,
        topic: str | None = None,
        bucket: str = "1h",
        start: int | str | None = None,
        end: int | str | None = None,
    ) -> Forecast:
        """Pending messages per ``bucket`` (1m, 1h, 1d) from ``start`` (default now) to
        ``end`` (epoch ms or ISO-8601), of one topic or all."""
        query = core.forecast_query(topic, bucket, start, end)
        return core.to_forecast(self._call("GET", f"/v1/forecast?{query}"))

    def pending(
        self,
        topic: str,
        start: int | str | None = None,
        end: int | str | None = None,
        *,
        limit: int = 100,
        cursor: str | None = None,
        with_body: bool = False,
        key: str | None = None,
    ) -> PendingPage:
        """A page of ``topic``'s pending messages in the order they will fire (slots in
        ``[start, end)``, epoch ms or ISO-8601); pass ``next_cursor`` back for the next.
        With ``key``: the one pending message of that producer key, or none (the page holds
        0 or 1; give no ``start``, ``end`` or ``cursor`` with it)."""
        query = core.pending_query(start, end, limit, cursor, with_body, key)
        return core.to_pending(self._call("GET", f"/v1/topics/{_quote(topic)}/pending?{query}"))

    def reschedule(
        self, message_id: str, *, deliver_at: core.When = None, deliver_after: core.When = None
    ) -> Scheduled:
        """Move a scheduled message to a new time; its id stays. Raises AlreadyDeliveredError
        or MessageCancelledError (409), NotFoundError (404)."""
        body = core.new_time(deliver_at, deliver_after)
        res = self._call("PATCH", f"/v1/messages/{message_id}", body)
        return core.to_scheduled(res, res["topic"])

    def reschedule_key(
        self, topic: str, key: str, *, deliver_at: core.When = None, deliver_after: core.When = None
    ) -> Scheduled:
        """:meth:`reschedule` by producer key."""
        path = f"/v1/messages?{urlencode({'topic': topic, 'key': key})}"
        res = self._call("PATCH", path, core.new_time(deliver_at, deliver_after))
        return core.to_scheduled(res, topic)

    def reschedule_batch(self, items: list[dict]) -> list[Rescheduled | HorologeError]:
        """Move many in one call; each item ``{id | topic+key, deliver_at | deliver_after}``;
        one result per item, in order (an error for an item that did not move)."""
        body = {"messages": core.reschedule_bodies(items)}
        return core.reschedule_results((self._call("POST", "/v1/messages/reschedule", body))["results"])

    def cancel(self, message_id: str) -> None:
        """Cancel; raises AlreadyDeliveredError (409) or NotFoundError (404)."""
        self._call("DELETE", f"/v1/messages/{message_id}")

    def cancel_key(self, topic: str, key: str) -> None:
        self._call("DELETE", f"/v1/messages?{urlencode({'topic': topic, 'key': key})}")

    # -- consuming ----------------------------------------------------------------

    def pull(
        self,
        topic: str,
        group: str,
        *,
        tags: str | None = None,
        max: int = 32,
        wait_ms: int = 0,
        visibility_ms: int = 30_000,
        ahead_ms: int = 0,
    ) -> PulledBatch:
        """Lease up to ``max`` messages of ``topic`` to ``group`` (waiting up to ``wait_ms``
        for the first); ack each by its ``receipt``, or the whole batch by
        ``batch.receipts()``. ``ahead_ms``: messages the master fired ahead may come up to
        that long before their ``deliver_at`` (0: none before it); the caller holds them."""
        return self._pulled(
            topic, group, tags, self._fetch_pull(topic, group, tags, max, wait_ms, visibility_ms, ahead_ms)
        )

    def _fetch_pull(self, *call) -> Reply:
        """:meth:`pull`'s call (``core.pull_call``'s arguments), its answer not decoded yet
        (:meth:`_pulled` does)."""
        name = self.pull_names.next()
        method, path, body = core.pull_call(*call, name)
        timeout = core.pull_timeout(self.timeout, body["wait_ms"])
        try:
            return self.request(method, path, body, accept=calls.PULL_COLUMNS, timeout=timeout)
        except InvalidRequestError as e:
            if name is None or not self.pull_names.refused(e):
                raise
            return self.request(*core.pull_call(*call), accept=calls.PULL_COLUMNS, timeout=timeout)

    def _pulled(self, topic: str, group: str, tags: str | None, reply: Reply) -> PulledBatch:
        """The batch of a :meth:`_fetch_pull` answer; what the client's own tag check
        rejects is acked away."""
        kept, stray = core.to_pulled(core.pull_answer(reply.content, reply.content_type), tags)
        if stray:
            self.ack(topic, group, stray)
        return kept

    def consume(
        self,
        topic: str,
        group: str,
        *,
        tags: str | None = None,
        batch: int = 100,
        wait_ms: int = 1_000,
        visibility_ms: int = 30_000,
        prefetch: int = 2,
        pulls: int = 3,
        ack_queue: int = 1_000,
        ahead_ms: int = AHEAD_MS,
    ) -> Subscription:
        """Iterate the group's messages; each is acked once the loop asks for the next
        (:mod:`horologe.client.consuming`). Pulls ``batch`` at a time, keeping up to
        ``prefetch`` pulled batches ready and up to ``pulls`` on their way; use it in a
        ``with`` block, or ``close()`` it.
        Pulls take messages up to ``ahead_ms`` before their time, and each is handed over
        once the master's clock reaches its ``deliver_at`` (0: pulled once due)."""
        fetch, decode = fetch_and_decode(self, topic, group, tags, batch, wait_ms, visibility_ms, ahead_ms)
        ack, give_back, renew = settle_calls(self, topic, group, visibility_ms)
        return Subscription(fetch, ack, prefetch, ack_queue, decode, pulls, give_back, renew, visibility_ms)

    def ack(self, topic: str, group: str, receipts: list[str]) -> int:
        """Acknowledge leased messages: never handed out again. How many messages the
        receipts name, each once (one already acked counts too)."""
        return self._call("POST", f"/v1/topics/{_quote(topic)}/ack", {"group": group, "receipts": receipts})[
            "acked"
        ]

    def nack(
        self, topic: str, group: str, receipts: list[str], *, dead_letter: bool = False, resend: bool = False
    ) -> dict:
        """Hand the messages out again after their retry level's delay (an attempt counted),
        or to the group's DLQ after the last level; ``dead_letter``: to the DLQ now.
        ``resend``: sent again across a failover even once it may have applied (a timeout,
        a 503 ``timeout``): the cluster applies one nack to a hand-out, so the messages
        move once, but the answer then counts only what the call that answered did."""
        body = {"group": group, "receipts": receipts, **({"dead_letter": True} if dead_letter else {})}
        return self._call("POST", f"/v1/topics/{_quote(topic)}/nack", body, resend=resend)

    def release(self, topic: str, group: str, receipts: list[str]) -> int:
        """Give leased messages back now, no attempt counted (a worker's warm shutdown):
        the group's consumers get them again at once. How many were still leased under
        these receipts (a lease that ended, or was given back, counts 0). Any number of
        receipts: sent ``MAX_ITEMS`` (1,000) a call, the most a call takes."""
        path = f"/v1/topics/{_quote(topic)}/release"
        released = 0
        for i in range(0, len(receipts), MAX_ITEMS):
            part = receipts[i : i + MAX_ITEMS]
            released += self._call("POST", path, {"group": group, "receipts": part})["released"]
        return released

    def extend(self, topic: str, group: str, receipts: list[str], visibility_ms: int) -> dict:
        """Renew leases these receipts still hold to ``visibility_ms`` from now, for a long
        task; the receipts stay good. ``{extended, lease_until}``: how many, and until when
        (the master's epoch ms). A lease that already ended is not renewed."""
        body = {"group": group, "receipts": receipts, "visibility_ms": visibility_ms}
        return self._call("POST", f"/v1/topics/{_quote(topic)}/extend", body)

    def backlog(self, topic: str, group: str) -> Backlog:
        """The group's messages of ``topic`` it has not acked, of those leased, and waiting
        for a pull (the queue's length)."""
        return Backlog(**self._call("GET", f"/v1/topics/{_quote(topic)}/groups/{quote(group, safe='')}"))

    def purge(self, topic: str, group: str) -> int:
        """Ack every due message of ``topic`` the group has not acked and no consumer holds
        (a task queue's purge; no undo): how many. Leased and later messages stay."""
        return self._call("POST", f"/v1/topics/{_quote(topic)}/purge", {"group": group})["purged"]

    # -- admin --------------------------------------------------------------------

    def node_status(self) -> dict:
        return core.to_node_status(self._call("GET", "/admin/status", admin=True))

    def members(self) -> list[dict]:
        """The cluster's members as the answering node's Raft log has them, that node first:
        ``{node_id, raft, http, voter, self, linked}`` each."""
        return self.membership()["members"]

    def membership(self) -> dict:
        """As :meth:`members`, with ``settled``: whether no change of the membership is in
        the answering node's log uncommitted (a new master may cut one that is)."""
        return self._call("GET", "/admin/cluster/members", admin=True)

    def add_member(self, node_id: str, raft: str, http: str, catch_up_s: float = 600.0) -> list[dict]:
        """Add a node started with ``join = true``: the master feeds it the log, then commits
        it as a member (waits up to ``catch_up_s`` for the catch-up). The members after."""
        body = {"node_id": node_id, "raft": raft, "http": http, "catch_up_s": catch_up_s}
        reply = self.request(
            "POST", "/admin/cluster/members", body, admin=True, resend=False, timeout=catch_up_s + CHANGE_S
        )
        return reply.body["members"]

    def remove_member(self, node_id: str) -> list[dict]:
        """Remove a member (not the master: :meth:`release_master` first). The members after."""
        path = f"/admin/cluster/members/{quote(node_id, safe='')}"
        return (self.request("DELETE", path, admin=True, resend=False, timeout=CHANGE_S)).body["members"]

    def release_master(self, to: str | None = None) -> dict:
        return self._call("POST", "/admin/release-master", {"to": to} if to else {}, admin=True, resend=False)


def _quote(topic: str) -> str:
    return quote(topic, safe="")
