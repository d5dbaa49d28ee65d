"""The API's request rules (DESIGN §6), refusing with the HTTP error shape.

The message rules live in ``horologe.storage.message_json``, below the node, so that the
pipeline shares them; the consumer-request rules are the node's own. Both refuse with an
``InvalidFieldError``, and :func:`answered_over_http` is the one place that turns it into
an :class:`ApiError`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import NamedTuple, ParamSpec, TypeVar

from horologe.storage import InvalidFieldError, message_json
from horologe.storage.message import MessageLimits
from horologe.storage.message_id import ID_LENGTH
from horologe.storage.message_json import (
    MAX_KEY,
    RESCHEDULE_FIELDS,
    TAG_PATTERN,
    TOPIC_RE,
    int_field,
    json_object,
    name_field,
    refusal,
)

from ..errors import ApiError

P = ParamSpec("P")
T = TypeVar("T")



def answered_over_http(parse: Callable[P, T]) -> Callable[P, T]:
    """``parse``, refusing with the ApiError that carries the HTTP status for the rule's code."""

    @functools.wraps(parse)
    def parse_for_http(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return parse(*args, **kwargs)
        except InvalidFieldError as e:
            raise ApiError.of_rule(e) from e

    return parse_for_http


parse_message = answered_over_http(message_json.parse_message)
parse_new_time = answered_over_http(message_json.parse_new_time)

PULL_FIELDS = {"group", "tags", "max", "wait_ms", "visibility_ms", "ahead_ms"}
RECEIPT_FIELDS = {"group", "receipts"}
MAX_PULL = 1000
MAX_WAIT_MS = 30_000
MAX_AHEAD_MS = 1_000  # fire_lead_ms's bound: nothing further ahead is ever ready
DEFAULT_VISIBILITY_MS = 30_000
MIN_VISIBILITY_MS, MAX_VISIBILITY_MS = 100, 12 * 3_600_000
# "*", empty (all tags), or tags joined by "||" (node/consumers/service.py: TagFilter)
TAG_FILTER_PATTERN = rf"(?:\*|{TAG_PATTERN}(?:\|\|{TAG_PATTERN})*)?"
TAG_FILTER_RE = re.compile(TAG_FILTER_PATTERN)


@answered_over_http
def parse_consumer_request(topic: str, obj, action: str) -> dict:
    """Validate a pull / ack / nack body. ``topic`` may be a group's ``%DLQ%<group>``."""
    obj = json_object(obj, PULL_FIELDS if action == "pull" else RECEIPT_FIELDS, "body")
    group = name_field(obj, "group")
    if not TOPIC_RE.fullmatch(topic) and topic != f"%DLQ%{group}":
        raise refusal("topic must be a topic name or %DLQ%<this group>", "topic")
    out = {"group": group, "topic": topic}
    if action != "pull":
        receipts = obj.get("receipts")
        if not isinstance(receipts, list) or not receipts or len(receipts) > MAX_PULL:
            raise refusal(f"receipts must be a list of 1-{MAX_PULL} receipts", "receipts")
        out["receipts"] = receipts
        return out
    tags = obj.get("tags")
    if "tags" in obj and (not isinstance(tags, str) or not TAG_FILTER_RE.fullmatch(tags)):
        raise refusal('tags must be "*", or tags joined by "||" like "a||b"', "tags")
    out["tags"] = tags
    for name, default, low, high in (
        ("max", 32, 1, MAX_PULL),
        ("wait_ms", 0, 0, MAX_WAIT_MS),
        ("visibility_ms", DEFAULT_VISIBILITY_MS, MIN_VISIBILITY_MS, MAX_VISIBILITY_MS),
        ("ahead_ms", 0, 0, MAX_AHEAD_MS),
    ):
        value = int_field(obj.get(name, default), name)
        if not low <= value <= high:
            raise refusal(f"{name} must be {low}..{high}", name, "out_of_range")
        out[name] = value
    return out


DLQ_PEEK_DEFAULT = 50
DIGITS_RE = re.compile(r"[0-9]{1,20}")
ID_RE = re.compile(f"[0-9a-f]{{{ID_LENGTH}}}")
MAX_POSITION = (1 << 63) - 1  # a ready-log position an ack entry can carry


@answered_over_http
def parse_dlq_group(group: str) -> str:
    """The group of ``/admin/dlq/{group}``: a group name (not ``%DLQ%...``)."""
    if not TOPIC_RE.fullmatch(group):
        raise refusal("group must be 1-128 of A-Z a-z 0-9 . _ - (not starting with . _ -)", "group")
    return group


@answered_over_http
def parse_dlq_peek(query) -> tuple[int, int]:
    """``?after=&limit=`` of a DLQ peek: (after, limit); ``after`` is -1 when absent."""
    unknown = sorted(set(query) - {"limit", "after"})
    if unknown:
        raise refusal(f"unknown query parameter {unknown[0]!r}", unknown[0], "unknown_field")
    after = _query_int(query, "after", -1, 0, MAX_POSITION)
    return after, _query_int(query, "limit", DLQ_PEEK_DEFAULT, 1, MAX_PULL)


def _query_int(query, name: str, default: int, low: int, high: int) -> int:
    text = query.get(name)
    if text is None:
        return default
    if not DIGITS_RE.fullmatch(text):
        raise refusal(f"{name} must be an integer {low}..{high}", name)
    if not low <= int(text) <= high:
        raise refusal(f"{name} must be {low}..{high}", name, "out_of_range")
    return int(text)


@answered_over_http
def parse_requeue(obj) -> list[str] | None:
    """``{"ids": [...]}`` (ids of DLQ entries, as a peek shows them) or ``{"all": true}``;
    the ids, or None for all."""
    obj = json_object(obj, {"ids", "all"}, "body")
    if ("ids" in obj) == ("all" in obj):
        raise refusal('give exactly one of "ids" and "all"', "ids")
    if "all" in obj:
        if obj["all"] is not True:
            raise refusal('all must be true (or give "ids")', "all")
        return None
    ids = obj["ids"]
    if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_PULL:
        raise refusal(f"ids must be a list of 1-{MAX_PULL} message ids", "ids")
    for i in ids:
        if not isinstance(i, str) or not ID_RE.fullmatch(i):
            shown = i if isinstance(i, str) and len(i) <= 40 else type(i).__name__
            raise refusal(f"not a message id: {shown!r} (want {ID_LENGTH} hex digits)", "ids")
    return ids


class Reschedule(NamedTuple):
    """One item of ``POST /v1/messages/reschedule``: by ``id``, or by ``key`` (topic, key)."""

    id: str | None
    key: tuple[str, str] | None
    at: int


def parse_reschedules(obj, now_ms: int, limits: MessageLimits, max_items: int) -> list[Reschedule | ApiError]:
    """``{"messages": [{id | topic+key, deliver_at | deliver_after}, ...]}``: each item
    parsed, or the refusal that answers for it alone."""
    if not isinstance(obj, dict) or set(obj) != {"messages"} or not isinstance(obj["messages"], list):
        raise ApiError(400, "invalid_body", 'body must be {"messages": [...]}', "messages")
    if len(obj["messages"]) > max_items:
        raise ApiError(
            413, "too_large", f"{len(obj['messages'])} items in one batch; at most {max_items}", "messages"
        )
    out: list[Reschedule | ApiError] = []
    for item in obj["messages"]:
        try:
            out.append(_reschedule_item(item, now_ms, limits))
        except ApiError as e:
            out.append(e)
    return out


@answered_over_http
def _reschedule_item(item, now_ms: int, limits: MessageLimits) -> Reschedule:
    item = json_object(item, {"id", "topic", "key", *RESCHEDULE_FIELDS}, "a reschedule")
    when = {f: item[f] for f in RESCHEDULE_FIELDS if f in item}
    at = message_json.parse_new_time(when, now_ms, limits)
    if "id" in item:
        if "topic" in item or "key" in item:
            raise refusal("give id, or topic and key, not both", "id")
        if not isinstance(item["id"], str) or not ID_RE.fullmatch(item["id"]):
            raise refusal(f"id must be {ID_LENGTH} hex digits", "id")
        return Reschedule(item["id"], None, at)
    topic = name_field(item, "topic")
    key = item.get("key")
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY:
        raise refusal(f"key must be a string of 1-{MAX_KEY} characters (or give id)", "key")
    return Reschedule(None, (topic, key), at)
