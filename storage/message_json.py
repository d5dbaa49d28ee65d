"""Turning request JSON into messages (DESIGN §6). Every refusal names its field.

The API's rules, here below the node so that the Spark pipeline checks rows by the very
rules the server applies without importing the server. A refusal is an
:class:`InvalidFieldError` whose ``code`` says which rule; the node answers it over HTTP.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import functools
import re

from .errors import InvalidFieldError
from .late_policies import ON_LATE, policy_headers
from .message import Message, MessageLimits

# Patterns without anchors, shared with the API's JSON Schemas (node/http/openapi/schemas.py);
# matched with fullmatch, since "$" would let a trailing newline through ("orders\n").
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
TAG_PATTERN = r"[A-Za-z0-9._-]{1,64}"
MAX_NAME = 128  # NAME_PATTERN's longest
MAX_TAG = 64  # TAG_PATTERN's longest
DURATION_PATTERN = r"([0-9]+)(ms|s|m|h|d)"
BASE64_PATTERN = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"
TOPIC_RE = re.compile(NAME_PATTERN)
TAG_RE = re.compile(TAG_PATTERN)
DURATION_RE = re.compile(DURATION_PATTERN)  # ASCII digits only, no spaces around
MAX_DURATION_DIGITS = 18  # a count of more is past any limit a duration has
UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# RocketMQ's 18 delay levels: 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h
DELAY_LEVELS_MS = [
    s * 1000 for s in (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
]
FIELDS = {
    "topic",
    "body",
    "body_b64",
    "tags",
    "deliver_at",
    "deliver_after",
    "delay_level",
    "key",
    "headers",
    "max_lateness",
    "on_late",
}
TIME_FIELDS = ("deliver_at", "deliver_after", "delay_level")
RESCHEDULE_FIELDS = ("deliver_at", "deliver_after")
RESERVED_HEADER_PREFIX = "x-horologe-"  # headers the node sets on the copies it makes
MAX_TAGS = 16
MAX_HEADERS = 32
MAX_HEADER_NAME = 128
MAX_HEADER_VALUE = 896  # so that a pair stays within 1 KiB
MAX_KEY = 256


def body_json(body: bytes) -> dict[str, str]:
    """``body`` as the API shows it, the inverse of a request's rule: ``body`` when it is
    UTF-8, else ``body_b64``."""
    try:
        return {"body": body.decode()}
    except UnicodeDecodeError:
        return {"body_b64": base64.b64encode(body).decode()}


def refusal(message: str, field: str, code: str = "invalid_field") -> InvalidFieldError:
    return InvalidFieldError(code, message, field)


def int_field(value, field: str) -> int:
    # JSON has one number type: 5.0 and 5e3 are integers, as JSON Schema reads them (and an
    # integer past 64 bits, which orjson reads as a float, is refused by the field's range).
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise refusal(f"{field} must be an integer", field)
    return value


def parse_deliver_at(value) -> int:
    return parse_instant(value, "deliver_at")


def parse_instant(value, field: str) -> int:
    """Epoch ms from an integer, or from an ISO-8601 string with a time zone."""
    if isinstance(value, str):
        try:
            zulu = value[-1:] in ("Z", "z")  # RFC 3339 allows a lowercase z
            t = dt.datetime.fromisoformat(value[:-1] + "+00:00" if zulu else value)
        except ValueError as e:
            raise refusal(f"{field} is not ISO-8601: {value!r}", field) from e
        if t.tzinfo is None:
            raise refusal(f"{field} needs a time zone (e.g. Z or +02:00)", field)
        return int(t.timestamp() * 1000)
    return int_field(value, field)


def parse_duration(value, field: str = "deliver_after") -> int:
    """ms, or a count and a unit: 500ms, 90s, 5m, 2h, 3d."""
    if isinstance(value, str):
        m = DURATION_RE.fullmatch(value)
        if not m:
            raise refusal(f"{field} {value!r} is not like 500ms, 90s, 5m, 2h or 3d", field)
        count = m.group(1).lstrip("0") or "0"
        if len(count) > MAX_DURATION_DIGITS:  # past any limit, and past what int() reads
            raise refusal(f"{field} is too long a time ({len(count)} digits)", field, "out_of_range")
        return int(count) * UNIT_MS[m.group(2)]
    ms = int_field(value, field)
    if ms < 0:
        raise refusal(f"{field} must not be negative", field, "out_of_range")
    return ms


def lateness_policy(obj: dict, limits: MessageLimits) -> dict[str, str]:
    """The headers that carry a message's ``max_lateness`` and ``on_late`` (late_policies)."""
    on_late = obj.get("on_late", "deliver")
    if on_late not in ON_LATE:
        raise refusal(f"on_late must be one of {', '.join(ON_LATE)}", "on_late")
    if "max_lateness" not in obj:
        if on_late != "deliver":
            raise refusal(f"on_late {on_late} needs max_lateness", "max_lateness")
        return {}
    ms = parse_duration(obj["max_lateness"], "max_lateness")
    if ms > limits.max_delay_ms:
        raise refusal(
            f"max_lateness is over {limits.max_delay_ms // 86_400_000} days", "max_lateness", "out_of_range"
        )
    return policy_headers(ms, on_late)


def json_object(obj, allowed: set[str], what: str) -> dict:
    """``obj`` as a JSON object with only ``allowed`` fields."""
    if not isinstance(obj, dict):
        raise InvalidFieldError("invalid_body", f"{what} must be a JSON object")
    if obj.keys() <= allowed:
        return obj
    unknown = sorted(map(str, set(obj) - allowed))  # str: a msgpack map may have bytes keys
    if unknown:
        raise refusal(f"unknown field {unknown[0]!r}", unknown[0], code="unknown_field")
    return obj


def name_field(obj: dict, field: str) -> str:
    """A topic or group name from ``obj[field]``."""
    value = obj.get(field)
    if not isinstance(value, str) or len(value) > MAX_NAME or not _is_name(value):
        raise refusal(f"{field} must be 1-128 of A-Z a-z 0-9 . _ - (not starting with . _ -)", field)
    return value


@functools.lru_cache(maxsize=4096)
def _is_name(value: str) -> bool:
    """Whether ``value`` (at most MAX_NAME long: the cache must not hold whatever a client
    sends) is a topic or group name (a batch repeats the same few)."""
    return TOPIC_RE.fullmatch(value) is not None


def deliver_time(obj: dict, now_ms: int, limits: MessageLimits, fields: tuple[str, ...]) -> int:
    """The delivery time ``obj`` asks for with at most one of ``fields`` (of TIME_FIELDS);
    now when it gives none."""
    given = [f for f in fields if f in obj]
    if len(given) > 1:
        raise refusal(f"give at most one of {', '.join(fields)} (got {', '.join(given)})", given[1])
    if "deliver_at" in given:
        deliver_at = parse_deliver_at(obj["deliver_at"])
        if deliver_at < 0:
            raise refusal("deliver_at is before the epoch", "deliver_at", "out_of_range")
    elif "deliver_after" in given:
        deliver_at = now_ms + parse_duration(obj["deliver_after"])
    elif "delay_level" in given:
        level = int_field(obj["delay_level"], "delay_level")
        if not 1 <= level <= len(DELAY_LEVELS_MS):
            raise refusal(f"delay_level must be 1..{len(DELAY_LEVELS_MS)}", "delay_level", "out_of_range")
        deliver_at = now_ms + DELAY_LEVELS_MS[level - 1]
    else:
        deliver_at = now_ms
    if deliver_at - now_ms > limits.max_delay_ms:
        raise refusal(
            f"deliver time is beyond the maximum delay of {limits.max_delay_ms // 86_400_000} days",
            given[0],
            "out_of_range",
        )
    return deliver_at


def parse_new_time(obj, now_ms: int, limits: MessageLimits) -> int:
    """A reschedule's body: exactly one of ``deliver_at`` and ``deliver_after``."""
    obj = json_object(obj, set(RESCHEDULE_FIELDS), "a reschedule")
    if not any(f in obj for f in RESCHEDULE_FIELDS):
        raise refusal("give deliver_at or deliver_after", "deliver_at")
    return deliver_time(obj, now_ms, limits, RESCHEDULE_FIELDS)


PLAIN_FIELDS = frozenset({"topic", "body", "key", "deliver_at", "tags"})


def parse_message(obj, now_ms: int, limits: MessageLimits) -> Message:
    plain = _plain(obj, now_ms, limits)
    if plain is None:
        return _any_message(obj, now_ms, limits)
    topic, body, deliver_at, key, tags = plain
    return Message(
        topic=topic, body=body, deliver_at_ms=deliver_at, produced_at_ms=now_ms, tags=tags, key=key
    )


def check_message(obj, now_ms: int, limits: MessageLimits) -> None:
    """Refuse what ``parse_message`` refuses (InvalidFieldError), without making the Message."""
    if _plain(obj, now_ms, limits) is None:
        _any_message(obj, now_ms, limits)


def _plain(obj, now_ms: int, limits: MessageLimits) -> tuple[str, bytes, int, str | None, tuple] | None:
    """What most produce items are (what the SDK and ``spark schedule`` send: a topic, a
    body, a key, an integer deliver_at, maybe a list of tags, nothing else), checked by
    the same rules in a few exact type tests: each row the pipeline checks (the node
    decodes a produce's body by a typed model first: node/http/rules/plain_batch.py).
    Its (topic, body, deliver_at, key, tags); None for anything else, or anything those
    rules might refuse: the general path decides."""
    if type(obj) is not dict or not obj.keys() <= PLAIN_FIELDS:
        return None
    topic, body, key = obj.get("topic"), obj.get("body"), obj.get("key")
    if type(topic) is not str or len(topic) > MAX_NAME or not _is_name(topic):
        return None
    tags = obj.get("tags", [])
    if type(tags) is not list:  # a string, None, a tuple...: the general path decides
        return None
    tags = tuple(tags)
    if tags and not _are_tags(tags):
        return None
    if type(body) is str:
        body = body.encode()
    elif type(body) is not bytes:
        return None
    deliver_at = obj.get("deliver_at", now_ms)
    if (
        len(body) > limits.max_body_bytes
        or type(deliver_at) is not int
        or not 0 <= deliver_at <= now_ms + limits.max_delay_ms
        or ("key" in obj and (type(key) is not str or not 1 <= len(key) <= MAX_KEY))
    ):
        return None
    return topic, body, deliver_at, key, tags


def _are_tags(tags: tuple) -> bool:
    """Whether ``tags`` are a message's tags. Only what could be is looked up in the cache:
    it must not hold whatever a client sends."""
    return (
        len(tags) <= MAX_TAGS
        and all(type(t) is str and len(t) <= MAX_TAG for t in tags)
        and _are_tag_names(tags)
    )


@functools.lru_cache(maxsize=4096)
def _are_tag_names(tags: tuple[str, ...]) -> bool:
    """Whether each of ``tags`` (at most MAX_TAGS, each at most MAX_TAG long) is a tag
    name (a batch repeats the same few sets)."""
    return all(TAG_RE.fullmatch(t) for t in tags)


def _any_message(obj, now_ms: int, limits: MessageLimits) -> Message:
    obj = json_object(obj, FIELDS, "a message")
    topic = name_field(obj, "topic")
    if ("body" in obj) == ("body_b64" in obj):
        raise refusal("give exactly one of body and body_b64", "body")
    if "body" in obj:
        body = obj["body"]
        if isinstance(body, str):
            body = body.encode()
        elif not isinstance(body, bytes):  # bytes come only in msgpack (node/http/app.py)
            raise refusal("body must be a string (use body_b64 for bytes, or raw bytes in msgpack)", "body")
    else:
        try:
            body = base64.b64decode(obj["body_b64"], validate=True)
        except (binascii.Error, TypeError, ValueError) as e:
            raise refusal("body_b64 is not valid base64", "body_b64") from e
    if len(body) > limits.max_body_bytes:
        raise refusal(f"body is {len(body)} bytes; the limit is {limits.max_body_bytes}", "body", "too_large")
    tags = obj.get("tags", [])
    if isinstance(tags, str):
        tags = [tags]
    if (
        not isinstance(tags, list)
        or len(tags) > MAX_TAGS
        or not all(isinstance(t, str) and TAG_RE.fullmatch(t) for t in tags)
    ):
        raise refusal(f"tags must be up to {MAX_TAGS} strings of A-Z a-z 0-9 . _ -", "tags")
    deliver_at = deliver_time(obj, now_ms, limits, TIME_FIELDS)
    key = obj.get("key")
    if "key" in obj and (not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY):
        raise refusal(f"key must be a string of 1-{MAX_KEY} characters", "key")
    headers = obj.get("headers", {})
    if (
        not isinstance(headers, dict)
        or len(headers) > MAX_HEADERS
        or not all(
            isinstance(k, str)
            and isinstance(v, str)
            and len(k) <= MAX_HEADER_NAME
            and len(v) <= MAX_HEADER_VALUE
            for k, v in headers.items()
        )
    ):
        raise refusal(
            f"headers must be up to {MAX_HEADERS} strings, names of at most {MAX_HEADER_NAME} characters "
            f"and values of at most {MAX_HEADER_VALUE}",
            "headers",
        )
    reserved = sorted(k for k in headers if k.lower().startswith(RESERVED_HEADER_PREFIX))
    if reserved:
        raise refusal(
            f"header {reserved[0]!r}: names starting {RESERVED_HEADER_PREFIX} are the node's", "headers"
        )
    policy = lateness_policy(obj, limits)
    return Message(
        topic=topic,
        body=body,
        deliver_at_ms=deliver_at,
        produced_at_ms=now_ms,
        tags=tuple(tags),
        key=key,
        headers={**headers, **policy} if policy else headers,
    )
