"""What the sync and async clients share: settings, request bodies, typed results, tag checks.

How a call goes over HTTP is in :mod:`horologe.client.calls`.
"""

from __future__ import annotations

import base64
import os
import secrets
import ssl
import time
from collections.abc import Callable
from urllib.parse import quote, urlencode

import httpx

from . import calls, pull_columns, tls
from .errors import HorologeError, error_for
from .models import (
    Forecast,
    MessageStatus,
    PendingMessage,
    PendingPage,
    PulledBatch,
    ReceivedMessage,
    Rescheduled,
    Scheduled,
    node_role,
)
from .pull_columns import PullAnswer


def message_body(
    topic: str,
    body: bytes | str,
    *,
    tags=(),
    deliver_at=None,
    deliver_after=None,
    delay_level=None,
    key: str | None = None,
    headers: dict | None = None,
    max_lateness: int | str | None = None,
    on_late: str | None = None,
) -> dict:
    """One message as the SDK sends it (in msgpack, so ``body`` goes as it is, bytes or
    text). Without ``key`` the SDK makes one up, so a retry after a failover is recognised
    by the cluster instead of stored twice."""
    if isinstance(body, bytearray | memoryview):
        body = bytes(body)
    elif not isinstance(body, str | bytes):
        raise TypeError(f"body must be bytes or str, not {type(body).__name__}")
    msg: dict = {"topic": topic, "key": key or fresh_keys(1)[0], "body": body}
    if tags:
        msg["tags"] = tag_list(tags)
    for name, value in (
        ("deliver_at", deliver_at),
        ("deliver_after", deliver_after),
        ("delay_level", delay_level),
        ("max_lateness", max_lateness),
        ("on_late", on_late),
    ):
        if value is not None:
            msg[name] = value
    if headers:
        msg["headers"] = headers
    return msg


def tag_list(tags) -> list[str]:
    """Tags as the API takes them, a list: a ``str`` is one tag (as a pull's filter names
    one), never its characters."""
    return [tags] if isinstance(tags, str) else list(tags)


def fresh_keys(n: int) -> list[str]:
    """``n`` random keys (128 bits each, as 32 hex digits), drawn together."""
    digits = os.urandom(16 * n).hex()
    return [digits[i : i + 32] for i in range(0, 32 * n, 32)]


_PLAIN_ITEM = frozenset({"topic", "body", "key", "deliver_at", "deliver_after", "delay_level", "tags"})


def batch_bodies(messages: list[dict]) -> list[dict]:
    """Each message of a batch (:func:`message_body` of each item), the keys the SDK
    makes up drawn together. An item of a topic, a ``str`` or ``bytes`` body, a key, a
    time and maybe a list of tags (most batches) is what ``message_body`` would make of
    it, its options left unset dropped, built here without the call."""
    keys = iter(fresh_keys(sum(1 for m in messages if not m.get("key"))))
    out = []
    for m in messages:
        tags = m.get("tags")
        if (
            m.keys() <= _PLAIN_ITEM
            and "topic" in m
            and type(m.get("body")) in (str, bytes)
            and (tags is None or (type(tags) is list and tags))
        ):
            msg = {k: v for k, v in m.items() if v is not None}
            if not msg.get("key"):
                msg["key"] = next(keys)
            out.append(msg)
        else:
            out.append(message_body(**m) if m.get("key") else message_body(**{**m, "key": next(keys)}))
    return out


# A call's timeout left to the client's (``request(timeout=...)`` overrides it for one call).
CLIENT_TIMEOUT = object()
# How long a change of the membership may take beyond a catch-up: the node waits 30 s for
# it to commit (node/membership.py), plus a check of the new node and the way there.
CHANGE_S = 45.0


class ClientSettings:
    """What both clients hold: the nodes, the tokens, and how long to wait and retry."""

    def __init__(
        self,
        urls,
        token: str,
        *,
        admin_token: str | None = None,
        timeout: float | None = 10.0,
        retry_s: float = 15.0,
        ca: str | os.PathLike | None = None,
        verify: bool | ssl.SSLContext = True,
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.endpoints = calls.Endpoints(urls)
        self.verify = tls.verify_setting(ca, verify)
        calls.check_token(token)
        calls.check_token(admin_token)
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout is seconds per request (or None for no limit); got {timeout!r}")
        if not retry_s >= 0:
            raise ValueError(f"retry_s is seconds to keep retrying, 0 or more; got {retry_s!r}")
        self.token, self.admin_token = token, admin_token
        self.timeout, self.retry_s = timeout, retry_s
        self.transport = transport
        self.pull_names = PullNames()

    def plan(
        self,
        build: calls.Build,
        method: str,
        path: str,
        body,
        *,
        admin: bool,
        resend: bool,
        accept: str | None = None,
    ) -> calls.Plan:
        """One API call, to be run by the client's httpx client (``build`` is its build_request)."""
        token = self.admin_token if admin else self.token
        return calls.api_call(
            self.endpoints,
            build,
            method,
            path,
            body,
            token,
            retry_s=self.retry_s,
            resend=resend,
            accept=accept,
        )


class PullNames:
    """The names pulls carry (``pull_id``): sent again across a failover, a named pull gets
    what it leased if its answer was lost.

    A node that predates named pulls refuses the field (400 ``unknown_field``), as in a
    rolling upgrade that updates the clients first. The pull is then sent again unnamed
    (:meth:`refused`), and pulls go unnamed for ``UNNAMED_S``; then a name is tried again,
    so that once every node is upgraded pulls are named again without a restart.
    """

    UNNAMED_S = 300.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._unnamed_until = 0.0

    def next(self) -> str | None:
        return None if self._clock() < self._unnamed_until else secrets.token_hex(8)

    def refused(self, error: HorologeError) -> bool:
        """Whether ``error`` is a node refusing a pull's name (then pulls go unnamed a while)."""
        if error.code == "unknown_field" and error.field == "pull_id":
            self._unnamed_until = self._clock() + self.UNNAMED_S
            return True
        return False


def pull_timeout(timeout: float | None, wait_ms: int) -> float | None:
    """A pull's request timeout: the client's on top of the long poll, which the node may
    spend waiting before it answers (a master that may not serve for a moment holds the
    pull first, up to its election timeout: well inside the client's)."""
    return None if timeout is None else timeout + wait_ms / 1000


def pull_call(
    topic: str,
    group: str,
    tags: str | None,
    max: int,
    wait_ms: int,
    visibility_ms: int,
    ahead_ms: int,
    pull_id: str | None = None,
) -> tuple[str, str, dict]:
    """A pull's method, path and body, named ``pull_id`` if given (:class:`PullNames`)."""
    body = {"group": group, "max": max, "wait_ms": wait_ms, "visibility_ms": visibility_ms}
    if pull_id is not None:
        body["pull_id"] = pull_id
    if tags is not None:
        body["tags"] = tags
    if ahead_ms:  # absent unless asked for: a node that predates it refuses the field
        body["ahead_ms"] = ahead_ms
    return "POST", f"/v1/topics/{quote(topic, safe='')}/pull", body


def batch_results(results: list[dict], bodies: list[dict]) -> list[Scheduled | HorologeError]:
    return [
        to_scheduled(r, b["topic"]) if "id" in r else error_for(400, r)
        for r, b in zip(results, bodies, strict=True)
    ]


When = int | str | None  # a time as the API takes it: epoch ms / ms, or text (ISO-8601, "90s")


def new_time(deliver_at: When, deliver_after: When) -> dict:
    """A reschedule's body: exactly one of ``deliver_at`` (epoch ms or ISO-8601) and
    ``deliver_after`` (ms or "90s"-style)."""
    if (deliver_at is None) == (deliver_after is None):
        raise ValueError("give exactly one of deliver_at and deliver_after")
    return {"deliver_at": deliver_at} if deliver_at is not None else {"deliver_after": deliver_after}


def reschedule_bodies(items: list[dict]) -> list[dict]:
    """Items of a batch reschedule: ``{id | topic+key, deliver_at | deliver_after}``."""
    return [
        {k: v for k, v in item.items() if k in ("id", "topic", "key")}
        | new_time(item.get("deliver_at"), item.get("deliver_after"))
        for item in items
    ]


def reschedule_results(results: list[dict]) -> list[Rescheduled | HorologeError]:
    return [
        Rescheduled(r["id"], r["deliver_at"]) if "id" in r else error_for(_status_of(r), r) for r in results
    ]


def _status_of(result: dict) -> int:
    """The status a batch item's error would have had alone (the batch answers 200)."""
    code = result.get("error", {}).get("code")
    return {"not_found": 404, "already_delivered": 409, "cancelled": 409}.get(code, 400)


def to_scheduled(d: dict, topic: str) -> Scheduled:
    return Scheduled(d["id"], topic, d["deliver_at"])


def forecast_query(topic: str | None, bucket: str, start: int | str | None, end: int | str | None) -> str:
    query = {"bucket": bucket, "topic": topic, "from": start, "to": end}
    return urlencode({k: v for k, v in query.items() if v is not None})


def to_forecast(d: dict) -> Forecast:
    return Forecast(d["bucket"], d["topic"], d["before"], [(b["start"], b["count"]) for b in d["buckets"]])


def pending_query(
    start: int | str | None,
    end: int | str | None,
    limit: int,
    cursor: str | None,
    with_body: bool,
    key: str | None = None,
) -> str:
    body = "true" if with_body else None
    query = {"from": start, "to": end, "limit": limit, "cursor": cursor, "with_body": body, "key": key}
    return urlencode({k: v for k, v in query.items() if v is not None})


def to_pending(d: dict) -> PendingPage:
    def one(m: dict) -> PendingMessage:
        body = m["body"].encode() if "body" in m else None
        if "body_b64" in m:
            body = base64.b64decode(m["body_b64"])
        return PendingMessage(
            m["id"], m["deliver_at"], m["fires_at"], tuple(m["tags"]), m.get("key"), m["headers"], body
        )

    return PendingPage([one(m) for m in d["messages"]], d["next_cursor"])


def to_status(d: dict) -> MessageStatus:
    return MessageStatus(
        d["id"], d["topic"], d["state"], d["deliver_at"], d.get("delivered_at"), d.get("late_by_ms")
    )


def to_node_status(d: dict) -> dict:
    """A node's ``/admin/status`` as it answered, its role read by :func:`node_role`."""
    return {**d, "role": node_role(d["role"])} if "role" in d else d


def pull_answer(content: bytes, content_type: str) -> PullAnswer:
    """A pull's answer, in any of its layouts (node/consumers/wire.py): msgpack by columns
    (decoded by msgspec: horologe/client/pull_columns.py), msgpack by messages, or JSON."""
    if content_type.startswith(calls.MSGPACK):
        answer = pull_columns.decode(content)
        if answer is not None:
            return answer
    res = calls.parse_body(content, content_type)
    if "records" in res:  # by columns, with records pull_columns does not read
        at, at_d = pull_columns.int64s(res["deliver_at"]), pull_columns.int64s(res["delivered_at"])
        columns = zip(res["records"], res["receipts"], at, at_d, strict=True)
        messages = [ReceivedMessage.from_record(*m) for m in columns]
        messages = pull_columns.with_deliveries(messages, res.get("deliveries", b""))
    else:
        messages = [
            ReceivedMessage.from_json(d) if isinstance(d, dict) else ReceivedMessage.from_record(*d)
            for d in res["messages"]
        ]
    return PullAnswer(messages, list(res.get("batch_receipts", ())), res.get("clock_ms"))


def to_pulled(answer: PullAnswer, tags: str | None) -> tuple[PulledBatch, list[str]]:
    """A pull's answer after the client's own exact tag check (docs/api.md, pull):
    (the batch kept, receipts of the messages to ack away). The batch receipts still
    name every message leased, the ones acked away too: acking them twice is harmless."""
    if tags in (None, "", "*"):
        kept, stray = answer.messages, []
    else:
        wanted = {t.strip() for t in tags.split("||")}
        kept, stray = [], []
        for m in answer.messages:
            if wanted.intersection(m.tags):
                kept.append(m)
            else:
                stray.append(m.receipt)
    return PulledBatch(kept, answer.batch_receipts if kept else (), answer.clock_ms), stray
