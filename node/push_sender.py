"""One push: the message POSTed as JSON to the subscription's URL, signed, and what came back.

The body is the message as a pull shows it (node/pull_wire.py, without a receipt):
``{id, topic, body | body_b64, tags, headers, deliver_at, delivered_at, attempt}``, with
the headers ``Horologe-Signature`` (node/push_signature.py), ``Horologe-Message-Id`` and
``Horologe-Attempt``. A 2xx answer is a success; any other status, a redirect (never
followed: a receiver could point the node at another host), a timeout or a connection
error is a failure. ``Retry-After`` (seconds, or an HTTP date) on a failure is kept, for
the nack to honour up to the next retry level.
"""

from __future__ import annotations

import email.utils
from typing import NamedTuple

import aiohttp
import orjson

from horologe.cluster.push_state import PushDef

from .pull_wire import message_fields
from .push_signature import ATTEMPT_HEADER, MESSAGE_ID_HEADER, SIGNATURE_HEADER, signature

ANSWER_BYTES_READ = 64 * 1024  # of an answer's body, read so the connection can be reused


class Sent(NamedTuple):
    ok: bool
    status: int | None  # None: no answer (timeout, refused, reset)
    retry_after_ms: int | None  # a failure's Retry-After, ms from now
    error: str | None = None  # why, when there was no answer


def push_body(record, deliver_at: int, delivered_at: int) -> tuple[bytes, dict]:
    """The JSON body of a push, and its fields."""
    fields = message_fields(record, deliver_at, delivered_at)
    return orjson.dumps(fields), fields


async def send(session: aiohttp.ClientSession, sub: PushDef, body: bytes, fields: dict, now_ms: int) -> Sent:
    """POST ``body`` (the push of ``fields``) to ``sub.url``, signed at ``now_ms``."""
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: signature(sub.secret, now_ms // 1000, body),
        MESSAGE_ID_HEADER: fields["id"],
        ATTEMPT_HEADER: str(fields["attempt"]),
    }
    timeout = aiohttp.ClientTimeout(total=sub.timeout_ms / 1000)
    try:
        async with session.post(
            sub.url, data=body, headers=headers, timeout=timeout, allow_redirects=False
        ) as answer:
            await _drain(answer)
            if 200 <= answer.status < 300:
                return Sent(True, answer.status, None)
            return Sent(False, answer.status, retry_after_ms(answer.headers.get("Retry-After"), now_ms))
    except TimeoutError:
        return Sent(False, None, None, f"no answer within {sub.timeout_ms} ms")
    except aiohttp.ClientError as e:
        return Sent(False, None, None, f"{type(e).__name__}: {e}")


async def _drain(answer: aiohttp.ClientResponse) -> None:
    """Read a little of the answer's body: a short one read whole lets the connection be
    kept; a long one is cut (the connection is then closed)."""
    read = 0
    while read < ANSWER_BYTES_READ:
        chunk = await answer.content.read(ANSWER_BYTES_READ - read)
        if not chunk:
            return
        read += len(chunk)


def retry_after_ms(value: str | None, now_ms: int) -> int | None:
    """``Retry-After`` as ms from ``now_ms``: delta-seconds or an HTTP date; None when absent
    or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value) * 1000
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0, int(when.timestamp() * 1000) - now_ms)
