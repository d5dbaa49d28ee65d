"""One push as bytes, and what its answer means. Pure: the clock comes in as ``now_ms``.

The body is the message as a pull shows it (node/consumers/wire.py, without a receipt):
``{id, topic, body | body_b64, tags, headers, deliver_at, delivered_at, attempt,
deliveries}``. The request is ``POST <path> HTTP/1.1`` with ``Host``, ``User-Agent``,
``Content-Type: application/json``, ``Content-Length`` and the headers
``Horologe-Signature`` (node/push/signature.py), ``Horologe-Message-Id``,
``Horologe-Attempt`` and ``Horologe-Deliveries``;
node/push/client.py sends it. A 2xx answer is a success; any other status, a redirect
(never followed: a receiver could point the node at another host), a timeout or a
connection error is a failure. ``Retry-After`` (seconds, or an HTTP date) on a failure is
kept, for the nack to honour up to the next retry level.
"""

from __future__ import annotations

import email.utils
from typing import NamedTuple

import orjson
from yarl import URL

from ..consumers.service import Handed
from ..consumers.wire import handed_fields
from .client import Answer, Origin
from .signature import ATTEMPT_HEADER, DELIVERIES_HEADER, MESSAGE_ID_HEADER, SIGNATURE_HEADER, signature

USER_AGENT = "horologe-push"


class Sent(NamedTuple):
    ok: bool
    status: int | None  # None: no answer (timeout, refused, reset)
    retry_after_ms: int | None  # a failure's Retry-After, ms from now
    error: str | None = None  # why, when there was no answer


class Target(NamedTuple):
    """Where a subscription's pushes go: the origin, and each request's first lines."""

    origin: Origin
    head: bytes  # request line to Content-Type, each line ended by CRLF

    @classmethod
    def of(cls, url: str) -> Target:
        """``url``: http(s), with a host (the subscription's, checked when it was put)."""
        u = URL(url)
        host = u.raw_host or ""
        authority = f"[{host}]" if ":" in host else host
        if u.explicit_port is not None:
            authority += f":{u.explicit_port}"
        head = (
            f"POST {u.raw_path_qs or '/'} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: {USER_AGENT}\r\n"
            "Content-Type: application/json\r\n"
        )
        return cls(Origin(u.scheme, host, u.port or (443 if u.scheme == "https" else 80)), head.encode())


def push_body(handed: Handed) -> tuple[bytes, dict]:
    """The JSON body of a push, and its fields. Its ``deliveries`` says how often the
    message has been handed out, this push counted (above 1, an earlier push of it may
    have arrived: its lease ended unacked, as when a master died with the request open)."""
    fields = handed_fields(handed)
    return orjson.dumps(fields), fields


def request(target: Target, secret: str, body: bytes, fields: dict, now_ms: int) -> bytes:
    """The whole request pushing ``body`` (the JSON of ``fields``), signed at ``now_ms``."""
    tail = (
        f"Content-Length: {len(body)}\r\n"
        f"{SIGNATURE_HEADER}: {signature(secret, now_ms // 1000, body)}\r\n"
        f"{MESSAGE_ID_HEADER}: {fields['id']}\r\n"
        f"{ATTEMPT_HEADER}: {fields['attempt']}\r\n"
        f"{DELIVERIES_HEADER}: {fields['deliveries']}\r\n\r\n"
    )
    return target.head + tail.encode() + body


def outcome(answer: Answer, now_ms: int) -> Sent:
    """What ``answer`` means for the push: acked on a 2xx, else failed."""
    if answer.status is None:
        return Sent(False, None, None, answer.error)
    if 200 <= answer.status < 300:
        return Sent(True, answer.status, None)
    return Sent(False, answer.status, retry_after_ms(answer.retry_after, now_ms))


def retry_after_ms(value: str | None, now_ms: int) -> int | None:
    """``Retry-After`` as ms from ``now_ms``: delta-seconds or an HTTP date; None when absent
    or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # not "²", a digit to isdigit() only
        return int(value) * 1000 if len(value) <= 15 else 10**18  # past any retry level
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        return None
    return max(0, int(when.timestamp() * 1000) - now_ms)
