"""What the sync and async clients share: requests, answers, master tracking, tag checks."""

from __future__ import annotations

import base64
import json
import uuid
from urllib.parse import urlsplit

from .errors import HorologeError, UnavailableError, error_for
from .models import MessageStatus, ReceivedMessage, Scheduled


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
) -> dict:
    """The JSON of one message. Without ``key`` the SDK makes one up, so a retry after a
    failover is recognised by the cluster instead of stored twice."""
    msg: dict = {"topic": topic, "key": key or uuid.uuid4().hex}
    if isinstance(body, str):
        msg["body"] = body
    else:
        msg["body_b64"] = base64.b64encode(body).decode()
    if tags:
        msg["tags"] = list(tags)
    for name, value in (
        ("deliver_at", deliver_at),
        ("deliver_after", deliver_after),
        ("delay_level", delay_level),
    ):
        if value is not None:
            msg[name] = value
    if headers:
        msg["headers"] = headers
    return msg


REDIRECTED = object()  # Endpoints.answered: a 307 to the master was followed


class Endpoints:
    """The known nodes, and the master once a redirect or an answer has named it."""

    def __init__(self, urls) -> None:
        urls = [urls] if isinstance(urls, str) else list(urls)
        if not urls:
            raise ValueError("give at least one node URL")
        self.urls = [u.rstrip("/") for u in urls]
        self.master: str | None = None

    def order(self) -> list[str]:
        return ([self.master] if self.master else []) + [u for u in self.urls if u != self.master]

    def redirected(self, location: str) -> str:
        """Remember the master a 307 named; credentials go only to hosts the caller gave.

        A node names the master by its configured address, usually another port of a
        host already given; a host not given (or another scheme) is refused rather than
        sent the token.
        """
        parts = urlsplit(location)
        given = {(urlsplit(u).scheme, urlsplit(u).hostname) for u in self.urls}
        if (parts.scheme, parts.hostname) not in given:
            raise UnavailableError(
                f"redirected to {parts.scheme}://{parts.netloc}, a host not among the nodes given; "
                "pass every node's URL to the client"
            )
        self.master = f"{parts.scheme}://{parts.netloc}"
        if self.master not in self.urls:
            self.urls.append(self.master)
        return self.master

    def failed(self, base: str) -> None:
        if self.master == base:
            self.master = None

    def answered(self, base: str, status: int, payload, location: str | None):
        """What node ``base``'s answer means: ``REDIRECTED`` (go again, master first), the
        payload, or an :class:`UnavailableError` returned so the next node is tried.
        Any other error is raised."""
        if status == 307 and location:
            self.redirected(location)
            return REDIRECTED
        try:
            return answer_or_raise(status, payload)
        except HorologeError as e:
            if not retryable(e):
                raise
            self.failed(base)
            return e

    def unreachable(self, base: str, reason, *, timed_out: bool, resend: bool) -> UnavailableError:
        """Node ``base`` did not answer: the error to keep while the next node is tried.
        Raises at once for a timed-out call that must not be resent: it may have applied."""
        if timed_out and not resend:
            raise UnavailableError(f"{base}: timed out; the call may or may not have applied")
        self.failed(base)
        return UnavailableError(f"{base}: {reason}")


class ClientSettings:
    """What both clients hold: the nodes, the tokens, and how long to wait and retry."""

    def __init__(
        self,
        urls,
        token: str,
        *,
        admin_token: str | None = None,
        timeout: float = 10.0,
        retry_s: float = 15.0,
    ) -> None:
        self.endpoints = Endpoints(urls)
        self.token, self.admin_token = token, admin_token
        self.timeout, self.retry_s = timeout, retry_s


def parse_body(raw: bytes | str):
    """An answer's JSON; a body that is not JSON becomes an error message."""
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        return {"error": {"message": text}}


def pull_body(group: str, tags: str | None, max: int, wait_ms: int, visibility_ms: int) -> dict:
    body = {"group": group, "max": max, "wait_ms": wait_ms, "visibility_ms": visibility_ms}
    if tags is not None:
        body["tags"] = tags
    return body


def batch_results(results: list[dict], bodies: list[dict]) -> list[Scheduled | HorologeError]:
    return [
        to_scheduled(r, b["topic"]) if "id" in r else error_for(400, r)
        for r, b in zip(results, bodies, strict=True)
    ]


def answer_or_raise(status: int, body):
    if 200 <= status < 300:
        return body
    raise error_for(status, body)


def retryable(err: HorologeError) -> bool:
    return isinstance(err, UnavailableError)


def to_scheduled(d: dict, topic: str) -> Scheduled:
    return Scheduled(d["id"], topic, d["deliver_at"])


def to_status(d: dict) -> MessageStatus:
    return MessageStatus(d["id"], d["topic"], d["state"], d["deliver_at"], d.get("delivered_at"))


def split_by_tags(messages: list[dict], tags: str | None) -> tuple[list[ReceivedMessage], list[str]]:
    """The client's own exact tag check (docs/api.md, pull); returns (kept, receipts to ack away)."""
    wanted = None if tags in (None, "", "*") else {t.strip() for t in tags.split("||")}
    kept, stray = [], []
    for d in messages:
        m = ReceivedMessage.from_json(d)
        if wanted is None or wanted.intersection(m.tags):
            kept.append(m)
        else:
            stray.append(m.receipt)
    return kept, stray
