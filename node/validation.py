"""Turning request JSON into messages (DESIGN §6). Every refusal names its field."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re

from horologe.storage import Message, MessageLimits

from .errors import ApiError

TOPIC_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
TAG_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
DURATION_RE = re.compile(r"^(\d+)(ms|s|m|h|d)$")
UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# RocketMQ's 18 delay levels: 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h
DELAY_LEVELS_MS = [
    s * 1000 for s in (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
]
FIELDS = {"topic", "body", "body_b64", "tags", "deliver_at", "deliver_after", "delay_level", "key", "headers"}
TIME_FIELDS = ("deliver_at", "deliver_after", "delay_level")
MAX_TAGS = 16
MAX_HEADERS = 32


def _bad(message: str, field: str, status: int = 400, code: str = "invalid_field") -> ApiError:
    return ApiError(status, code, message, field)


def _int(value, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(f"{field} must be an integer", field)
    return value


def parse_deliver_at(value) -> int:
    if isinstance(value, str):
        try:
            t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as e:
            raise _bad(f"deliver_at is not ISO-8601: {value!r}", "deliver_at") from e
        if t.tzinfo is None:
            raise _bad("deliver_at needs a time zone (e.g. Z or +02:00)", "deliver_at")
        return int(t.timestamp() * 1000)
    return _int(value, "deliver_at")


def parse_duration(value) -> int:
    if isinstance(value, str):
        m = DURATION_RE.match(value.strip())
        if not m:
            raise _bad(f"deliver_after {value!r} is not like 500ms, 90s, 5m, 2h or 3d", "deliver_after")
        return int(m.group(1)) * UNIT_MS[m.group(2)]
    ms = _int(value, "deliver_after")
    if ms < 0:
        raise _bad("deliver_after must not be negative", "deliver_after", 422, "out_of_range")
    return ms


def _object(obj, allowed: set[str], what: str) -> dict:
    """``obj`` as a JSON object with only ``allowed`` fields, or a 400."""
    if not isinstance(obj, dict):
        raise ApiError(400, "invalid_body", f"{what} must be a JSON object")
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise _bad(f"unknown field {unknown[0]!r}", unknown[0], code="unknown_field")
    return obj


def _name(obj: dict, field: str) -> str:
    """A topic or group name from ``obj[field]``, or a 400."""
    value = obj.get(field)
    if not isinstance(value, str) or not TOPIC_RE.match(value):
        raise _bad(f"{field} must be 1-128 of A-Z a-z 0-9 . _ - (not starting with . _ -)", field)
    return value


def parse_message(obj, now_ms: int, limits: MessageLimits) -> Message:
    obj = _object(obj, FIELDS, "a message")
    topic = _name(obj, "topic")
    if ("body" in obj) == ("body_b64" in obj):
        raise _bad("give exactly one of body and body_b64", "body")
    if "body" in obj:
        if not isinstance(obj["body"], str):
            raise _bad("body must be a string (use body_b64 for bytes)", "body")
        body = obj["body"].encode()
    else:
        try:
            body = base64.b64decode(obj["body_b64"], validate=True)
        except (binascii.Error, TypeError, ValueError) as e:
            raise _bad("body_b64 is not valid base64", "body_b64") from e
    if len(body) > limits.max_body_bytes:
        raise _bad(
            f"body is {len(body)} bytes; the limit is {limits.max_body_bytes}", "body", 413, "too_large"
        )
    tags = obj.get("tags", [])
    if isinstance(tags, str):
        tags = [tags]
    if (
        not isinstance(tags, list)
        or len(tags) > MAX_TAGS
        or not all(isinstance(t, str) and TAG_RE.match(t) for t in tags)
    ):
        raise _bad(f"tags must be up to {MAX_TAGS} strings of A-Z a-z 0-9 . _ -", "tags")
    given = [f for f in TIME_FIELDS if f in obj]
    if len(given) > 1:
        raise _bad(
            f"give at most one of deliver_at, deliver_after, delay_level (got {', '.join(given)})", given[1]
        )
    if "deliver_at" in obj:
        deliver_at = parse_deliver_at(obj["deliver_at"])
        if deliver_at < 0:
            raise _bad("deliver_at is before the epoch", "deliver_at", 422, "out_of_range")
    elif "deliver_after" in obj:
        deliver_at = now_ms + parse_duration(obj["deliver_after"])
    elif "delay_level" in obj:
        level = _int(obj["delay_level"], "delay_level")
        if not 1 <= level <= len(DELAY_LEVELS_MS):
            raise _bad(f"delay_level must be 1..{len(DELAY_LEVELS_MS)}", "delay_level", 422, "out_of_range")
        deliver_at = now_ms + DELAY_LEVELS_MS[level - 1]
    else:
        deliver_at = now_ms
    if deliver_at - now_ms > limits.max_delay_ms:
        raise _bad(
            f"deliver time is beyond the maximum delay of {limits.max_delay_ms // 86_400_000} days",
            given[0],
            422,
            "out_of_range",
        )
    key = obj.get("key")
    if key is not None and (not isinstance(key, str) or not 1 <= len(key) <= 256):
        raise _bad("key must be a string of 1-256 characters", "key")
    headers = obj.get("headers", {})
    if (
        not isinstance(headers, dict)
        or len(headers) > MAX_HEADERS
        or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) + len(v) <= 1024 for k, v in headers.items()
        )
    ):
        raise _bad(f"headers must be up to {MAX_HEADERS} string pairs of at most 1 KiB each", "headers")
    return Message(
        topic=topic,
        body=body,
        deliver_at_ms=deliver_at,
        produced_at_ms=now_ms,
        tags=tuple(tags),
        key=key,
        headers=headers,
    )


PULL_FIELDS = {"group", "tags", "max", "wait_ms", "visibility_ms"}
RECEIPT_FIELDS = {"group", "receipts"}
MAX_PULL = 1000
MAX_WAIT_MS = 30_000
DEFAULT_VISIBILITY_MS = 30_000


def parse_consumer_request(topic: str, obj, action: str) -> dict:
    """Validate a pull / ack / nack body. ``topic`` may be a group's ``%DLQ%<group>``."""
    obj = _object(obj, PULL_FIELDS if action == "pull" else RECEIPT_FIELDS, "body")
    group = _name(obj, "group")
    if not TOPIC_RE.match(topic) and topic != f"%DLQ%{group}":
        raise _bad("topic must be a topic name or %DLQ%<this group>", "topic")
    out = {"group": group, "topic": topic}
    if action != "pull":
        receipts = obj.get("receipts")
        if not isinstance(receipts, list) or not receipts or len(receipts) > MAX_PULL:
            raise _bad(f"receipts must be a list of 1-{MAX_PULL} receipts", "receipts")
        out["receipts"] = receipts
        return out
    tags = obj.get("tags")
    if tags is not None and not isinstance(tags, str):
        raise _bad('tags must be an expression like "a||b" or "*"', "tags")
    out["tags"] = tags
    for name, default, low, high in (
        ("max", 32, 1, MAX_PULL),
        ("wait_ms", 0, 0, MAX_WAIT_MS),
        ("visibility_ms", DEFAULT_VISIBILITY_MS, 100, 12 * 3_600_000),
    ):
        value = _int(obj.get(name, default), name)
        if not low <= value <= high:
            raise _bad(f"{name} must be {low}..{high}", name, 422, "out_of_range")
        out[name] = value
    return out
