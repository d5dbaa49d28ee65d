"""The API's request rules (DESIGN §6), refusing with the HTTP error shape.

The message rules live in ``horologe.storage.message_json``, below the node, so that the
pipeline shares them; the other bodies here (pull, ack and nack, a DLQ requeue, a release,
reschedules) are the node's own, each a typed model (model.py). Both refuse with an
``InvalidFieldError``, and :func:`answered_over_http` is the one place that turns it into
an :class:`ApiError`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Annotated, NamedTuple, ParamSpec, TypeVar

import msgspec
from msgspec import UNSET, Meta, UnsetType

from horologe.storage import InvalidFieldError, message_json
from horologe.storage.message import MessageLimits
from horologe.storage.message_json import MAX_KEY, RESCHEDULE_FIELDS, TAG_PATTERN, TOPIC_RE, refusal

from ..errors import ApiError
from .model import Body, DateTime, Duration, EpochMs, Key, MessageId, Name, decode, matching

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

MAX_PULL = 1000
MAX_WAIT_MS = 30_000
MAX_AHEAD_MS = 1_000  # fire_lead_ms's bound: nothing further ahead is ever ready
DEFAULT_VISIBILITY_MS = 30_000
MIN_VISIBILITY_MS, MAX_VISIBILITY_MS = 100, 12 * 3_600_000
# "*", empty (all tags), or tags joined by "||" (node/consumers/service.py: TagFilter)
TAG_FILTER_PATTERN = rf"(?:\*|{TAG_PATTERN}(?:\|\|{TAG_PATTERN})*)?"
TagFilter = Annotated[
    str,
    matching(
        TAG_FILTER_PATTERN,
        description='`"a||b"`: messages with tag a or b; `"*"` or empty: all',
    ),
]


class Pull(Body):
    group: Name
    tags: TagFilter = "*"
    max: Annotated[int, Meta(ge=1, le=MAX_PULL)] = 32
    wait_ms: Annotated[
        int, Meta(ge=0, le=MAX_WAIT_MS, description="long poll: answers as soon as anything arrives")
    ] = 0
    visibility_ms: Annotated[
        int,
        Meta(
            ge=MIN_VISIBILITY_MS,
            le=MAX_VISIBILITY_MS,
            description="the lease; a message not acked by then is handed out again",
        ),
    ] = DEFAULT_VISIBILITY_MS
    ahead_ms: Annotated[
        int,
        Meta(
            ge=0,
            le=MAX_AHEAD_MS,
            description="hand out messages the wheel fired ahead (fire_lead_ms) up to this long before their "
            "deliver_at; the consumer holds each until then (the SDK's consume does)",
        ),
    ] = 0
    pull_id: (
        Annotated[
            str,
            matching(
                "[A-Za-z0-9_.-]{1,64}",
                description="the pull's name, the same each time it is sent: a pull sent again after "
                "its answer was lost gets the messages that pull leased, on any master (the SDK names "
                "every pull)",
            ),
        ]
        | None
    ) = None


class Group(Body):
    group: Name


class Receipts(Body):
    group: Name
    # Any item is taken here: one that is no receipt is 400 invalid_receipt (consumers/receipts.py).
    receipts: Annotated[
        list,
        Meta(
            min_length=1,
            max_length=MAX_PULL,
            description="message receipts or batch receipts a pull handed to this group; any other string "
            "is 400 `invalid_receipt`",
            extra_json_schema={"items": {"type": "string"}},
        ),
    ]


class Nack(Receipts):
    dead_letter: Annotated[
        bool, Meta(description="to the group's DLQ now, whatever the retry level (a final rejection)")
    ] = False


class Extend(Receipts):
    visibility_ms: Annotated[
        int,
        Meta(
            ge=MIN_VISIBILITY_MS,
            le=MAX_VISIBILITY_MS,
            description="the lease from now on; a message not acked by then is handed out again",
        ),
    ] = DEFAULT_VISIBILITY_MS


@answered_over_http
def parse_consumer_request(topic: str, obj, action: str) -> dict:
    """Validate a pull / ack / nack / release / extend / purge body. ``topic`` may be a
    group's ``%DLQ%<group>``."""
    req = decode({"pull": Pull, "nack": Nack, "extend": Extend, "purge": Group}.get(action, Receipts), obj)
    if not TOPIC_RE.fullmatch(topic) and topic != f"%DLQ%{req.group}":
        raise refusal("topic must be a topic name or %DLQ%<this group>", "topic")
    return {"topic": topic, **msgspec.structs.asdict(req)}


DLQ_PEEK_DEFAULT = 50
DIGITS_RE = re.compile(r"[0-9]{1,20}")
MAX_POSITION = (1 << 63) - 1  # a ready-log position an ack entry can carry


@answered_over_http
def parse_dlq_group(group: str) -> str:
    """The group of ``/admin/dlq/{group}``: a group name (not ``%DLQ%...``)."""
    return message_json.name_field({"group": group}, "group")


@answered_over_http
def parse_names(topic: str, group: str) -> tuple[str, str]:
    """The topic and group of a path (``/v1/topics/{topic}/groups/{group}``, a push
    subscription's): two names, as a pull takes them."""
    names = {"topic": topic, "group": group}
    return message_json.name_field(names, "topic"), message_json.name_field(names, "group")


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


class Requeue(Body):
    """Exactly one of `ids` and `all`."""

    ids: Annotated[list[MessageId], Meta(min_length=1, max_length=MAX_PULL)] | UnsetType = UNSET
    all: Annotated[bool, Meta(extra_json_schema={"const": True})] | UnsetType = UNSET


@answered_over_http
def parse_requeue(obj) -> list[str] | None:
    """``{"ids": [...]}`` (ids of DLQ entries, as a peek shows them) or ``{"all": true}``;
    the ids, or None for all."""
    req = decode(Requeue, obj)
    if (req.ids is UNSET) == (req.all is UNSET):
        raise refusal('give exactly one of "ids" and "all"', "ids")
    if req.all is UNSET:
        return req.ids
    if req.all is not True:
        raise refusal('all must be true (or give "ids")', "all")
    return None


class Release(Body):
    to: Annotated[str, Meta(description="the node id of the peer to hand over to")] | UnsetType = UNSET


parse_release = answered_over_http(functools.partial(decode, Release))


class NewTime(Body):
    """Exactly one of `deliver_at` and `deliver_after` (from the master's clock); more than 400 days
    ahead, or before the epoch, is 422. A time already past delivers the message at once."""

    deliver_at: EpochMs | DateTime | UnsetType = UNSET
    deliver_after: Duration | UnsetType = UNSET


@answered_over_http
def parse_new_time(obj, now_ms: int, limits: MessageLimits) -> int:
    """A reschedule's body: its types here, its time by the rules of a produce (message_json)."""
    decode(NewTime, obj, "a reschedule")
    return message_json.parse_new_time(obj, now_ms, limits)


class RescheduleItem(NewTime):
    """A message, by `id` or by `topic` and `key`, and its new time."""

    id: MessageId | UnsetType = UNSET
    topic: Name | UnsetType = UNSET
    key: Key | UnsetType = UNSET


class Reschedule(NamedTuple):
    """One item of ``POST /v1/messages/reschedule``: by ``id``, or by ``key`` (topic, key)."""

    id: str | None
    key: tuple[str, str] | None
    at: int


def batch_items(obj, max_items: int, what: str) -> list:
    """The items of ``{"messages": [...]}``, at most ``max_items`` (``what`` names them in the 413)."""
    if not isinstance(obj, dict) or set(obj) != {"messages"} or not isinstance(obj["messages"], list):
        raise ApiError(400, "invalid_body", 'body must be {"messages": [...]}', "messages")
    if len(obj["messages"]) > max_items:
        raise ApiError(
            413, "too_large", f"{len(obj['messages'])} {what} in one batch; at most {max_items}", "messages"
        )
    return obj["messages"]


def parse_reschedules(obj, now_ms: int, limits: MessageLimits, max_items: int) -> list[Reschedule | ApiError]:
    """``{"messages": [{id | topic+key, deliver_at | deliver_after}, ...]}``: each item
    parsed, or the refusal that answers for it alone."""
    out: list[Reschedule | ApiError] = []
    for item in batch_items(obj, max_items, "items"):
        try:
            out.append(_reschedule_item(item, now_ms, limits))
        except ApiError as e:
            out.append(e)
    return out


@answered_over_http
def _reschedule_item(obj, now_ms: int, limits: MessageLimits) -> Reschedule:
    item = decode(RescheduleItem, obj, "a reschedule")
    at = message_json.parse_new_time({f: obj[f] for f in RESCHEDULE_FIELDS if f in obj}, now_ms, limits)
    if item.id is not UNSET:
        if item.topic is not UNSET or item.key is not UNSET:
            raise refusal("give id, or topic and key, not both", "id")
        return Reschedule(item.id, None, at)
    if item.topic is UNSET:
        raise refusal("topic must be 1-128 of A-Z a-z 0-9 . _ - (not starting with . _ -)", "topic")
    if item.key is UNSET:
        raise refusal(f"key must be a string of 1-{MAX_KEY} characters (or give id)", "key")
    return Reschedule(None, (item.topic, item.key), at)
