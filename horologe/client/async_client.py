"""The asyncio client: ``async with AsyncClient([...], token=...) as c: await c.produce(...)``."""

from __future__ import annotations

import functools
from urllib.parse import quote, urlencode

import httpx

from . import calls, core
from .calls import Reply
from .consuming import AHEAD_MS, AsyncSubscription, fetch_and_decode, settle_calls
from .core import CHANGE_S
from .errors import HorologeError, InvalidRequestError
from .limits import MAX_ITEMS
from .models import Backlog, Forecast, MessageStatus, PendingPage, PulledBatch, Rescheduled, Scheduled
from .push_subscriptions import AsyncPushCalls
from .schedules import AsyncScheduleCalls


class AsyncClient(core.ClientSettings, AsyncScheduleCalls, AsyncPushCalls):
    """Same calls as :class:`horologe.client.Client`, awaitable, over one pooled httpx.AsyncClient."""

    def __init__(self, urls, token: str, **settings) -> None:
        """``settings``: admin_token, timeout (s, per request; None: no limit), retry_s (s,
        across failover), ca (PEM file or directory of the CAs to trust on https:// URLs),
        verify (True, or an ``ssl.SSLContext`` that verifies; see :mod:`horologe.client.tls`),
        transport (an httpx transport, e.g. ``httpx.MockTransport`` in tests)."""
        super().__init__(urls, token, **settings)
        self._http: httpx.AsyncClient | None = None

    async def __aenter__(self) -> AsyncClient:
        self._http = httpx.AsyncClient(timeout=self.timeout, verify=self.verify, transport=self.transport)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def request(
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
        """See :meth:`horologe.client.Client.request`."""
        if self._http is None:
            raise RuntimeError("use 'async with AsyncClient(...)'")
        build = self._http.build_request
        if timeout is not core.CLIENT_TIMEOUT:  # this call's own (s; None: no limit)
            build = functools.partial(build, timeout=timeout)
        plan = self.plan(build, method, path, body, admin=admin, resend=resend, accept=accept)
        return await calls.run_async(self._http, plan)

    async def _call(self, method: str, path: str, body=None, **options):
        return (await self.request(method, path, body, **options)).body

    async def produce(self, topic: str, body: bytes | str, **options) -> Scheduled:
        msg = core.message_body(topic, body, **options)
        return core.to_scheduled(await self._call("POST", "/v1/messages", calls.Msgpack(msg)), topic)

    async def produce_batch(self, messages: list[dict]) -> list[Scheduled | HorologeError]:
        bodies = core.batch_bodies(messages)
        res = (await self._call("POST", "/v1/messages/batch", calls.Msgpack({"messages": bodies})))["results"]
        return core.batch_results(res, bodies)

    async def status(self, message_id: str) -> MessageStatus:
        return core.to_status(await self._call("GET", f"/v1/messages/{message_id}"))

    async def forecast(
        self,
        topic: str | None = None,
        bucket: str = "1h",
        start: int | str | None = None,
        end: int | str | None = None,
    ) -> Forecast:
        """Pending messages per ``bucket`` (1m, 1h, 1d) from ``start`` (default now) to
        ``end`` (epoch ms or ISO-8601), of one topic or all."""
        query = core.forecast_query(topic, bucket, start, end)
        return core.to_forecast(await self._call("GET", f"/v1/forecast?{query}"))

    async def pending(
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
        return core.to_pending(await self._call("GET", f"/v1/topics/{quote(topic, safe='')}/pending?{query}"))

    async def reschedule(
        self, message_id: str, *, deliver_at: core.When = None, deliver_after: core.When = None
    ) -> Scheduled:
        """Move a scheduled message to a new time; its id stays. Raises AlreadyDeliveredError
        or MessageCancelledError (409), NotFoundError (404)."""
        body = core.new_time(deliver_at, deliver_after)
        res = await self._call("PATCH", f"/v1/messages/{message_id}", body)
        return core.to_scheduled(res, res["topic"])

    async def reschedule_key(
        self, topic: str, key: str, *, deliver_at: core.When = None, deliver_after: core.When = None
    ) -> Scheduled:
        """:meth:`reschedule` by producer key."""
        path = f"/v1/messages?{urlencode({'topic': topic, 'key': key})}"
        res = await self._call("PATCH", path, core.new_time(deliver_at, deliver_after))
        return core.to_scheduled(res, topic)

    async def reschedule_batch(self, items: list[dict]) -> list[Rescheduled | HorologeError]:
        """Move many in one call; each item ``{id | topic+key, deliver_at | deliver_after}``;
        one result per item, in order (an error for an item that did not move)."""
        body = {"messages": core.reschedule_bodies(items)}
        return core.reschedule_results((await self._call("POST", "/v1/messages/reschedule", body))["results"])

    async def cancel(self, message_id: str) -> None:
        await self._call("DELETE", f"/v1/messages/{message_id}")

    async def cancel_key(self, topic: str, key: str) -> None:
        await self._call("DELETE", f"/v1/messages?{urlencode({'topic': topic, 'key': key})}")

    async def pull(
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
        reply = await self._fetch_pull(topic, group, tags, max, wait_ms, visibility_ms, ahead_ms)
        return await self._pulled(topic, group, tags, reply)

    async def _fetch_pull(self, *call) -> Reply:
        """:meth:`pull`'s call (``core.pull_call``'s arguments), its answer not decoded yet
        (:meth:`_pulled` does)."""
        name = self.pull_names.next()
        method, path, body = core.pull_call(*call, name)
        timeout = core.pull_timeout(self.timeout, body["wait_ms"])
        try:
            return await self.request(method, path, body, accept=calls.PULL_COLUMNS, timeout=timeout)
        except InvalidRequestError as e:
            if name is None or not self.pull_names.refused(e):
                raise
            return await self.request(*core.pull_call(*call), accept=calls.PULL_COLUMNS, timeout=timeout)

    async def _pulled(self, topic: str, group: str, tags: str | None, reply: Reply) -> PulledBatch:
        """As :meth:`Client._pulled`."""
        kept, stray = core.to_pulled(core.pull_answer(reply.content, reply.content_type), tags)
        if stray:
            await self.ack(topic, group, stray)
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
    ) -> AsyncSubscription:
        """As :meth:`Client.consume`: ``async with c.consume(...) as s: async for m in s: ...``
        (call it inside a running loop)."""
        fetch, decode = fetch_and_decode(self, topic, group, tags, batch, wait_ms, visibility_ms, ahead_ms)
        ack, give_back, renew = settle_calls(self, topic, group, visibility_ms)
        return AsyncSubscription(
            fetch, ack, prefetch, ack_queue, decode, pulls, give_back, renew, visibility_ms
        )

    async def ack(self, topic: str, group: str, receipts: list[str]) -> int:
        """As :meth:`Client.ack`."""
        body = {"group": group, "receipts": receipts}
        return (await self._call("POST", f"/v1/topics/{quote(topic, safe='')}/ack", body))["acked"]

    async def nack(
        self, topic: str, group: str, receipts: list[str], *, dead_letter: bool = False, resend: bool = False
    ) -> dict:
        """As :meth:`Client.nack`."""
        body = {"group": group, "receipts": receipts, **({"dead_letter": True} if dead_letter else {})}
        return await self._call("POST", f"/v1/topics/{quote(topic, safe='')}/nack", body, resend=resend)

    async def release(self, topic: str, group: str, receipts: list[str]) -> int:
        """As :meth:`Client.release`."""
        path = f"/v1/topics/{quote(topic, safe='')}/release"
        released = 0
        for i in range(0, len(receipts), MAX_ITEMS):
            part = receipts[i : i + MAX_ITEMS]
            released += (await self._call("POST", path, {"group": group, "receipts": part}))["released"]
        return released

    async def extend(self, topic: str, group: str, receipts: list[str], visibility_ms: int) -> dict:
        """As :meth:`Client.extend`."""
        body = {"group": group, "receipts": receipts, "visibility_ms": visibility_ms}
        return await self._call("POST", f"/v1/topics/{quote(topic, safe='')}/extend", body)

    async def node_status(self) -> dict:
        return core.to_node_status(await self._call("GET", "/admin/status", admin=True))

    async def backlog(self, topic: str, group: str) -> Backlog:
        """As :meth:`Client.backlog`."""
        path = f"/v1/topics/{quote(topic, safe='')}/groups/{quote(group, safe='')}"
        return Backlog(**await self._call("GET", path))

    async def purge(self, topic: str, group: str) -> int:
        """As :meth:`Client.purge`."""
        reply = await self._call("POST", f"/v1/topics/{quote(topic, safe='')}/purge", {"group": group})
        return reply["purged"]

    async def members(self) -> list[dict]:
        """The cluster's members as the answering node's Raft log has them, that node first:
        ``{node_id, raft, http, voter, self, linked}`` each."""
        return (await self.membership())["members"]

    async def membership(self) -> dict:
        """As :meth:`Client.membership`."""
        return await self._call("GET", "/admin/cluster/members", admin=True)

    async def add_member(self, node_id: str, raft: str, http: str, catch_up_s: float = 600.0) -> list[dict]:
        """Add a node started with ``join = true``: the master feeds it the log, then commits
        it as a member (waits up to ``catch_up_s`` for the catch-up). The members after."""
        body = {"node_id": node_id, "raft": raft, "http": http, "catch_up_s": catch_up_s}
        reply = await self.request(
            "POST", "/admin/cluster/members", body, admin=True, resend=False, timeout=catch_up_s + CHANGE_S
        )
        return reply.body["members"]

    async def remove_member(self, node_id: str) -> list[dict]:
        """Remove a member (not the master: :meth:`release_master` first). The members after."""
        path = f"/admin/cluster/members/{quote(node_id, safe='')}"
        return (await self.request("DELETE", path, admin=True, resend=False, timeout=CHANGE_S)).body[
            "members"
        ]

    async def release_master(self, to: str | None = None) -> dict:
        body = {"to": to} if to else {}
        return await self._call("POST", "/admin/release-master", body, admin=True, resend=False)
