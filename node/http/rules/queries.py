"""The queries of ``GET /v1/forecast``, ``GET /v1/topics/{topic}/pending`` (DESIGN §6,
Schedule management) and the other routes that take one, refused with the API's error
shape before anything is read or proposed."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass

import msgpack

from horologe.cluster.consumer_groups import RETRY_PREFIX
from horologe.storage.message_json import MAX_KEY, TOPIC_RE, parse_instant, refusal

from .messages import answered_over_http

BUCKET_MS = {"1m": 60_000, "1h": 3_600_000, "1d": 86_400_000}
DEFAULT_BUCKETS = {"1m": 60, "1h": 48, "1d": 30}  # without ``to``: an hour, two days, a month
MAX_BUCKETS = 10_000
FIELDS = {"topic", "bucket", "from", "to"}
PENDING_FIELDS = {"from", "to", "limit", "cursor", "with_body", "key"}
NOT_WITH_KEY = ("cursor", "from", "to")  # a key names one message: no page, no window
MAX_PENDING_PAGE = 1000
DEFAULT_PENDING_PAGE = 100
FOREVER_MS = 1 << 62
EPOCH_MS_RE = re.compile(r"-?[0-9]{1,16}")


@dataclass(frozen=True)
class ForecastQuery:
    topic: str | None
    bucket: str
    start_ms: int  # the first bucket's start: ``from`` rounded down to the bucket
    buckets: int

    @property
    def bucket_ms(self) -> int:
        return BUCKET_MS[self.bucket]


@answered_over_http
def parse_forecast_query(query: Mapping[str, str], now_ms: int) -> ForecastQuery:
    """Buckets are whole and aligned to UTC epoch multiples of their size: ``from``
    (default now) rounds down to its bucket and ``to`` up to the end of its own."""
    _known_only(query, FIELDS)
    topic = query.get("topic")
    if topic is not None:
        _check_topic(topic)
    bucket = query.get("bucket", "1h")
    if bucket not in BUCKET_MS:
        raise refusal(f"bucket must be one of {', '.join(BUCKET_MS)}", "bucket")
    size = BUCKET_MS[bucket]
    asked = _instant(query, "from", now_ms)
    start = asked - asked % size
    if "to" not in query:
        return ForecastQuery(topic, bucket, start, DEFAULT_BUCKETS[bucket])
    stop = _instant(query, "to", now_ms)
    if stop <= asked:
        raise refusal("to must lie after from", "to", "invalid_range")
    buckets = -(-(stop - start) // size)
    if buckets > MAX_BUCKETS:
        raise refusal(f"{buckets} buckets of {bucket}; at most {MAX_BUCKETS} per call", "to", "out_of_range")
    return ForecastQuery(topic, bucket, start, buckets)


@dataclass(frozen=True)
class PendingQuery:
    start_ms: int
    stop_ms: int
    limit: int
    after: tuple[int, int] | None  # from the cursor: the last key of the previous page
    with_body: bool
    key: str | None = None  # look one message up by its producer key instead


@answered_over_http
def parse_pending_query(topic: str, query: Mapping[str, str]) -> PendingQuery:
    """``from`` (default: everything pending) and ``to`` (default: no end) bound the slots;
    ``cursor`` is a previous answer's ``next_cursor``; ``key`` asks for the one message of
    that producer key instead, so it takes none of ``cursor``, ``from`` and ``to``."""
    _known_only(query, PENDING_FIELDS)
    _check_topic(topic)
    key = query.get("key")
    if key is not None:
        if not 1 <= len(key) <= MAX_KEY:
            raise refusal(f"key must be a string of 1-{MAX_KEY} characters", "key")
        for name in NOT_WITH_KEY:
            if name in query:
                raise refusal(f"key looks one message up: give no {name} with it", name, "conflicting_fields")
    start = _instant(query, "from", 0)
    stop = _instant(query, "to", FOREVER_MS)
    if stop <= start:
        raise refusal("to must lie after from", "to", "invalid_range")
    raw_limit = query.get("limit", str(DEFAULT_PENDING_PAGE))
    if not EPOCH_MS_RE.fullmatch(raw_limit) or raw_limit.startswith("-"):
        raise refusal(f"limit must be an integer from 1 to {MAX_PENDING_PAGE}", "limit")
    if not 1 <= int(raw_limit) <= MAX_PENDING_PAGE:
        raise refusal(f"limit must be from 1 to {MAX_PENDING_PAGE}", "limit", "out_of_range")
    with_body = query.get("with_body", "false")
    if with_body not in ("true", "false"):
        raise refusal("with_body must be true or false", "with_body")
    cursor = query.get("cursor")
    after = None if cursor is None else cursor_key(cursor)
    return PendingQuery(start, stop, int(raw_limit), after, with_body == "true", key)


def page_cursor(after: tuple[int, int]) -> str:
    """The opaque cursor naming where the next page starts."""
    return base64.urlsafe_b64encode(msgpack.packb(list(after))).decode().rstrip("=")


def cursor_key(cursor: str) -> tuple[int, int]:
    try:
        key = msgpack.unpackb(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError) as e:  # bad base64 (binascii.Error), bad msgpack, an unhashable map key
        raise refusal("cursor is not one this API gave out", "cursor") from e
    if (
        not isinstance(key, list)
        or len(key) != 2
        or not all(isinstance(k, int) and not isinstance(k, bool) and 0 <= k < FOREVER_MS for k in key)
    ):
        raise refusal("cursor is not one this API gave out", "cursor")
    return key[0], key[1]


@answered_over_http
def parse_key_query(query: Mapping[str, str]) -> tuple[str, str]:
    """``?topic=&key=`` of a cancel or reschedule by producer key: the (topic, key) it names,
    checked as the pending list checks them, before anything is proposed."""
    _known_only(query, {"topic", "key"})
    topic, key = query.get("topic"), query.get("key")
    if not topic or not key:
        raise refusal("give topic= and key=", "topic" if not topic else "key", "invalid_query")
    _check_topic(topic)
    if len(key) > MAX_KEY:
        raise refusal(f"key must be a string of 1-{MAX_KEY} characters", "key")
    return topic, key


@answered_over_http
def parse_backup_query(query: Mapping[str, str]) -> bool:
    """``?allow_stale=true|false`` of a backup: whether a node whose copy may be behind
    the cluster's is backed up all the same."""
    _known_only(query, {"allow_stale"})
    value = query.get("allow_stale", "false")
    if value not in ("true", "false"):
        raise refusal("allow_stale must be true or false", "allow_stale")
    return value == "true"


def _known_only(query: Mapping[str, str], fields: set[str]) -> None:
    for name in query:
        if name not in fields:
            known = ", ".join(sorted(fields))
            raise refusal(f"unknown query parameter {name!r}; known: {known}", name, "unknown_field")


def _instant(query: Mapping[str, str], name: str, default: int) -> int:
    value = query.get(name)
    if value is None:
        return default
    ms = parse_instant(int(value) if EPOCH_MS_RE.fullmatch(value) else value, name)
    if ms < 0:
        raise refusal(f"{name} must not lie before 1970", name, "out_of_range")
    return ms


def _check_topic(topic: str) -> None:
    """A topic name, or a group's retries ``%RETRY%<group>``: the topics messages are stored under."""
    name = topic[len(RETRY_PREFIX) :] if topic.startswith(RETRY_PREFIX) else topic
    if not TOPIC_RE.fullmatch(name):
        raise refusal("topic must be a topic name (or a group's %RETRY%<group>)", "topic")
