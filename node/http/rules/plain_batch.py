"""Plain messages, decoded from the request's bytes by a typed model.

What the SDK and ``spark schedule`` send is plain: a topic, a body, maybe a key, an
integer ``deliver_at`` and a list of tags, nothing else. :func:`plain_batch` decodes such
a batch straight into columns with msgspec (a ``Struct`` per item, its constraints the
API's rules), without a dict per message; :func:`plain_message` a single produce's body.
Anything the model does not take, and any item the rules might refuse (a deliver time
past the maximum delay, a body over the limit), gives None: the general path
(``storage.message_json``) then parses each item and answers each refusal as
documented, so a message is judged the same either way (tests/node/test_plain_batch.py
holds the two to each other).
"""

from __future__ import annotations

from typing import Annotated

import msgspec
import numpy as np
from msgspec import UNSET, Meta, UnsetType

from horologe.storage import Message, MessageColumns
from horologe.storage.message import MessageLimits
from horologe.storage.message_json import MAX_TAGS

from .model import Key, Name, Tag


class _Item(msgspec.Struct, forbid_unknown_fields=True):
    topic: Name
    body: str
    key: Key | UnsetType = UNSET
    deliver_at: int | UnsetType = UNSET
    tags: Annotated[list[Tag], Meta(max_length=MAX_TAGS)] = []


class _RawItem(_Item, forbid_unknown_fields=True):
    body: bytes  # msgpack's raw bytes, as the SDK sends them (a str body: the general path)


class _Batch(msgspec.Struct, forbid_unknown_fields=True):
    messages: list[_Item]


class _RawBatch(msgspec.Struct, forbid_unknown_fields=True):
    messages: list[_RawItem]


_JSON = msgspec.json.Decoder(_Batch)
_MSGPACK = msgspec.msgpack.Decoder(_RawBatch)
_ONE_JSON = msgspec.json.Decoder(_Item)
_ONE_MSGPACK = msgspec.msgpack.Decoder(_RawItem)


def _within_limits(
    items: list[_Item], msgpack: bool, now_ms: int, limits: MessageLimits
) -> tuple[list[bytes], list[int]] | None:
    """The items' bodies and deliver times when every body is within the limit and every
    time within the maximum delay; else None (the general path answers the refusal)."""
    bodies = [m.body for m in items] if msgpack else [m.body.encode() for m in items]
    times = [now_ms if m.deliver_at is UNSET else m.deliver_at for m in items]
    if any(len(b) > limits.max_body_bytes for b in bodies) or not all(
        0 <= t <= now_ms + limits.max_delay_ms for t in times
    ):
        return None
    return bodies, times


def plain_message(raw: bytes, msgpack: bool, now_ms: int, limits: MessageLimits) -> Message | None:
    """The single message ``raw`` (JSON, or msgpack) when it is plain and good; else None."""
    try:
        m = (_ONE_MSGPACK if msgpack else _ONE_JSON).decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    got = _within_limits([m], msgpack, now_ms, limits)
    if got is None:
        return None
    (body,), (at,) = got
    key = None if m.key is UNSET else m.key
    return Message(
        topic=m.topic, body=body, deliver_at_ms=at, produced_at_ms=now_ms, tags=tuple(m.tags), key=key
    )


def plain_batch(
    raw: bytes, msgpack: bool, now_ms: int, limits: MessageLimits, max_items: int
) -> MessageColumns | None:
    """The batch ``raw`` (JSON, or msgpack) as columns when every item is plain and good,
    and it holds at most ``max_items``; else None."""
    try:
        items = (_MSGPACK if msgpack else _JSON).decode(raw).messages
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if len(items) > max_items:
        return None
    got = _within_limits(items, msgpack, now_ms, limits)
    if got is None:
        return None
    bodies, times = got
    return MessageColumns(
        [m.topic for m in items],
        bodies,
        np.array(times, dtype=np.int64),
        np.full(len(items), now_ms, dtype=np.int64),
        [None if m.key is UNSET else m.key for m in items],
        {i: tuple(m.tags) for i, m in enumerate(items) if m.tags},
    )
