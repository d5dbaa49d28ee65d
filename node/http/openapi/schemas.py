"""The JSON Schemas of the API's bodies (``components/schemas`` of /openapi.json).

Most are made by msgspec from the typed models that validate the requests
(node/http/rules/) and from those of the answers (answers.py), so the document cannot drift
from what the server accepts. A rule across fields (exactly one of `body` and `body_b64`)
is checked by hand after decoding, and added here (``ACROSS``). ``Message`` is put together
here, as no model decodes it (storage/message_json.py does, shared with the pipeline and
tuned for the produce path): its fields are the models' field types (rules/model.py), and
its other rules are taken from the constants that enforce them. The schemas say
exactly what a request must be to pass validation: the fuzz test
(tests/integration/test_fuzz_api.py) sends data valid by them and expects it accepted,
and data invalid by them and expects it refused. What JSON Schema cannot say (a body's
size in UTF-8 bytes, a deliver time's distance from the server's clock) is in the
descriptions and answers 413 or 422.
"""

from __future__ import annotations

import msgspec

from horologe.storage.late_policies import ON_LATE
from horologe.storage.message import MessageLimits
from horologe.storage.message_json import (
    DELAY_LEVELS_MS,
    MAX_HEADERS,
    MAX_TAGS,
    TIME_FIELDS,
)

from ..rules.cluster import NewMember
from ..rules.messages import Extend, Group, Nack, NewTime, Pull, Receipts, Release, Requeue, RescheduleItem
from ..rules.model import (
    BodyB64,
    DateTime,
    Duration,
    EpochMs,
    HeaderName,
    HeaderValue,
    Key,
    MessageBody,
    MessageId,
    Name,
    Tag,
)
from ..rules.push import NewSubscription
from ..rules.schedules import NewSchedule
from .answers import ANSWERS, BucketSize

LIMITS = MessageLimits()
REQUESTS = (
    Pull, Group, Receipts, Nack, Extend, Requeue, Release, NewTime, RescheduleItem, NewSubscription,
    NewSchedule, NewMember,
)  # fmt: skip


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _one_of(*fields) -> dict:
    """Exactly one of ``fields`` (each a name, or names that go together). Beside an object's
    properties it goes under ``allOf``, which validates the same: openapi-python-client reads a
    ``oneOf`` there as a union of its branches, which name no type, and the object becomes
    untyped in a generated client."""
    return {"oneOf": [{"required": [f] if isinstance(f, str) else list(f)} for f in fields]}


def _at_most_one(fields: tuple[str, ...]) -> dict:
    """No two of ``fields`` together."""
    pairs = [[a, b] for i, a in enumerate(fields) for b in fields[i + 1 :]]
    return {"not": {"anyOf": [{"required": pair} for pair in pairs]}}


def _batch(item: dict, description: str) -> dict:
    """``{"messages": [item, ...]}``: any item is taken, and a bad one answered in its place."""
    return {
        "type": "object",
        "required": ["messages"],
        "properties": {
            "messages": {
                "type": "array",
                "maxItems": 1000,
                "description": f"At most `max_batch_items` (1000 by default; 413 beyond). {description}",
                "items": {"anyOf": [item, {}]},
            }
        },
        "additionalProperties": False,
    }


ONE_BODY = _one_of("body", "body_b64")
ONE_NEW_TIME = _one_of("deliver_at", "deliver_after")
# What the models' types cannot say: rules across fields (checked by hand after decoding), and
# lists of either of two answers (msgspec takes no union of untagged structs).
ACROSS = {
    "NewTime": {"allOf": [ONE_NEW_TIME]},
    "RescheduleItem": {"allOf": [_one_of("id", ("topic", "key")), ONE_NEW_TIME]},
    "Requeue": {"allOf": [_one_of("ids", "all")]},
    "NewSchedule": {"allOf": [ONE_BODY]},
    "PulledMessage": {"allOf": [ONE_BODY]},
    "Schedule": {"allOf": [ONE_BODY]},
    "BatchResults": {"properties": {"results": {"items": {"oneOf": [ref("BatchScheduled"), ref("Error")]}}}},
    "RescheduleResults": {
        "properties": {"results": {"items": {"oneOf": [ref("BatchRescheduled"), ref("Error")]}}}
    },
}


def _as_documented(schema):
    """msgspec's schema as the document shows it: a pattern's ``\\Z`` (the end, in Python) is
    ECMA-262's ``$``; no ``title`` (the component's name says it), no empty ``required``."""
    if isinstance(schema, dict):
        out = {k: _as_documented(v) for k, v in schema.items() if k != "title" and (k, v) != ("required", [])}
        if isinstance(out.get("pattern"), str) and out["pattern"].endswith("\\Z"):
            out["pattern"] = out["pattern"][:-2] + "$"
        return out
    return [_as_documented(v) for v in schema] if isinstance(schema, list) else schema


def _merged(schema: dict, extra: dict) -> dict:
    for key, value in extra.items():
        schema[key] = _merged(schema.get(key, {}), value) if isinstance(value, dict) else value
    return schema


def _models() -> dict[str, dict]:
    _, made = msgspec.json.schema_components(REQUESTS + ANSWERS, ref_template="#/components/schemas/{name}")
    made = _as_documented(made)
    for name, extra in ACROSS.items():
        _merged(made[name], extra)
    return made


def _named(kind) -> dict:
    """The schema of a field type (a name, a tag, an id), for the path parameters that ``ref`` it."""
    return _as_documented(msgspec.json.schema(kind))


SCHEMAS: dict[str, dict] = {
    "Name": _named(Name),
    "Tag": _named(Tag),
    "MessageId": _named(MessageId),
    "BucketSize": {
        **_named(BucketSize),
        "description": "a minute, an hour or a day, aligned to UTC multiples of it",
    },
    "Message": {
        "type": "object",
        "description": "A message to schedule. Exactly one of `body` and `body_b64`; at most one of "
        "`deliver_at`, `deliver_after` and `delay_level` (none: deliver now). A deliver time more than "
        f"{LIMITS.max_delay_ms // 86_400_000} days ahead of the master's clock, or before the epoch, is 422.",
        "required": ["topic"],
        "properties": {
            "topic": ref("Name"),
            "body": _named(MessageBody),
            "body_b64": _named(BodyB64),
            "tags": {
                "oneOf": [ref("Tag"), {"type": "array", "maxItems": MAX_TAGS, "items": ref("Tag")}],
                "description": "one tag, or a list of them",
            },
            "deliver_at": _named(EpochMs | DateTime),
            "deliver_after": _named(Duration),
            "delay_level": {
                "type": "integer",
                "minimum": 1,
                "maximum": len(DELAY_LEVELS_MS),
                "description": "RocketMQ's: 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
            },
            "key": {
                **_named(Key),
                "description": "idempotency key: the same (topic, key) names the same message while it is "
                "kept, and cancels by key",
            },
            "max_lateness": {
                **_named(Duration),
                "description": "how late it may fall due (ms or `90s`-style); past that, `on_late` applies",
            },
            "on_late": {
                "enum": list(ON_LATE),
                "default": "deliver",
                "description": "past `max_lateness`: `deliver` anyway, put in the `dlq` of every group that "
                "reads the topic, or `drop`; `dlq` and `drop` need `max_lateness`",
            },
            "headers": {
                "type": "object",
                "maxProperties": MAX_HEADERS,
                "propertyNames": _named(HeaderName),
                "additionalProperties": _named(HeaderValue),
            },
        },
        "additionalProperties": False,
        "allOf": [
            ONE_BODY,
            _at_most_one(TIME_FIELDS),
            {
                "if": {"required": ["on_late"], "properties": {"on_late": {"enum": ["dlq", "drop"]}}},
                "then": {"required": ["max_lateness"]},
            },
        ],
    },
    "Batch": _batch(
        ref("Message"),
        "Each item is a `Message`; an item that is not gets `{error}` in its place in `results`, and "
        "the others are stored all the same.",
    ),
    "RescheduleBatch": _batch(
        ref("RescheduleItem"),
        "Each item names a message by `id`, or by `topic` and `key`, and gives its new time; an item "
        "that is not valid, or names no scheduled message, gets `{error}` in its place in `results`.",
    ),
    **_models(),
}
