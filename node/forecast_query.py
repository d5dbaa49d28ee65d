"""The query of ``GET /v1/forecast`` (DESIGN §6, Schedule management), refused with the
API's error shape before anything is read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from horologe.cluster.consumer_groups import RETRY_PREFIX
from horologe.storage.message_json import TOPIC_RE, parse_instant, refusal

from .validation import answered_over_http

BUCKET_MS = {"1m": 60_000, "1h": 3_600_000, "1d": 86_400_000}
DEFAULT_BUCKETS = {"1m": 60, "1h": 48, "1d": 30}  # without ``to``: an hour, two days, a month
MAX_BUCKETS = 10_000
FIELDS = {"topic", "bucket", "from", "to"}
EPOCH_MS_RE = re.compile(r"^-?\d{1,16}$")


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
    for name in query:
        if name not in FIELDS:
            known = ", ".join(sorted(FIELDS))
            raise refusal(f"unknown query parameter {name!r}; known: {known}", name, "unknown_field")
    topic = query.get("topic")
    if topic is not None and not (TOPIC_RE.match(topic) or _is_retry_topic(topic)):
        raise refusal("topic must be a topic name (or a group's %RETRY%<group>)", "topic")
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


def _instant(query: Mapping[str, str], name: str, default: int) -> int:
    value = query.get(name)
    if value is None:
        return default
    ms = parse_instant(int(value) if EPOCH_MS_RE.match(value) else value, name)
    if ms < 0:
        raise refusal(f"{name} must not lie before 1970", name, "out_of_range")
    return ms


def _is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_PREFIX) and bool(TOPIC_RE.match(topic[len(RETRY_PREFIX) :]))
