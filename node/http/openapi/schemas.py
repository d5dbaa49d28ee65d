"""The JSON Schemas of the API's bodies (``components/schemas`` of /openapi.json).

Each rule is taken from the constant that enforces it (storage/message_json.py,
node/http/rules/messages.py), so the document cannot drift from what the server accepts. The
schemas say exactly what a request must be to pass validation: the fuzz test
(tests/integration/test_fuzz_api.py) sends data valid by them and expects it accepted,
and data invalid by them and expects it refused. What JSON Schema cannot say (a body's
size in UTF-8 bytes, a deliver time's distance from the server's clock) is in the
descriptions and answers 413 or 422.
"""

from __future__ import annotations

import re

from horologe.cluster.committed_reads import COUNTERS
from horologe.cluster.schedule_state import SCHEDULE_HEADER
from horologe.cluster.schedule_times import CRON_PATTERN, LAST_INSTANT_MS, MAX_CRON_LENGTH
from horologe.storage.late_policies import ON_LATE
from horologe.storage.message import MessageLimits
from horologe.storage.message_id import ID_PATTERN
from horologe.storage.message_json import (
    BASE64_PATTERN,
    DELAY_LEVELS_MS,
    DURATION_PATTERN,
    MAX_HEADER_NAME,
    MAX_HEADER_VALUE,
    MAX_HEADERS,
    MAX_KEY,
    MAX_TAGS,
    NAME_PATTERN,
    TAG_PATTERN,
    TIME_FIELDS,
)

from ..rules.messages import (
    MAX_AHEAD_MS,
    MAX_PULL,
    MAX_VISIBILITY_MS,
    MAX_WAIT_MS,
    MIN_VISIBILITY_MS,
    TAG_FILTER_PATTERN,
)
from ..rules.push import MAX_URL, NUMBERS, SECRET_PATTERN, URL_PATTERN
from ..rules.schedules import MAX_SCHEDULE_HEADERS

LIMITS = MessageLimits()
MAX_INT64 = (1 << 63) - 1  # a larger JSON integer is read as a float, and refused as not an integer
EPOCH_MS = {"type": "integer", "minimum": 0, "maximum": MAX_INT64, "description": "Unix epoch milliseconds"}
# Only `true`. Typed, since openapi-python-client turns an untyped `const: true` into a syntax
# error; with the type it reads a bool (what `true` alone accepts is unchanged).
TRUE = {"type": "boolean", "const": True}


# What a message carries, as pull, pending and DLQ answers show it.
CONTENT = {
    "tags": {"type": "array", "items": {"type": "string"}},
    "headers": {"type": "object", "additionalProperties": {"type": "string"}},
    "body": {"type": "string"},
    "body_b64": {"type": "string", "description": "when the body is not UTF-8"},
}


PRODUCER_KEY = {"type": "string", "description": "the producer's key, when it gave one"}

DELIVER_AT = {
    "oneOf": [EPOCH_MS, {"type": "string", "format": "date-time", "description": "RFC 3339, with a zone"}],
}
DELIVER_AFTER = {
    "oneOf": [
        {"type": "integer", "minimum": 0, "maximum": LIMITS.max_delay_ms, "description": "ms"},
        {
            "type": "string",
            "pattern": f"^{DURATION_PATTERN}$",
            "description": "a count and a unit: `500ms`, `90s`, `5m`, `2h`, `3d`",
        },
    ],
}
NEW_TIME = {"deliver_at": DELIVER_AT, "deliver_after": DELIVER_AFTER}


def _one_of(*fields: str) -> dict:
    """Exactly one of ``fields``. Beside an object's properties it goes under ``allOf``, which
    validates the same: openapi-python-client reads a ``oneOf`` there as a union of its
    branches, which name no type, and the object becomes untyped in a generated client."""
    return {"oneOf": [{"required": [field]} for field in fields]}


ONE_BODY = _one_of("body", "body_b64")
ONE_NEW_TIME = _one_of("deliver_at", "deliver_after")


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


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


def _error_shape(extra: dict) -> dict:
    """``{"error": {code, message, field?}}``, and ``extra`` beside ``error``."""
    error = {
        "type": "object",
        "required": ["code", "message"],
        "properties": {
            "code": {"type": "string", "description": "what went wrong, e.g. `invalid_field`"},
            "message": {"type": "string"},
            "field": {"type": "string", "description": "the request field at fault, when one is"},
        },
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "required": ["error"],
        "properties": {"error": error, **extra},
        "additionalProperties": False,
    }


SCHEMAS: dict[str, dict] = {
    "Error": _error_shape({}),
    "Unavailable": _error_shape(
        {
            "leader": {
                "type": ["string", "null"],
                "description": "the master's node id once one is known; null while none is",
            }
        }
    ),
    "Name": {
        "type": "string",
        "pattern": f"^{NAME_PATTERN}$",
        "description": "A topic or group name: 1-128 of `A-Z a-z 0-9 . _ -`, not starting with `. _ -`.",
    },
    "Tag": {"type": "string", "pattern": f"^{TAG_PATTERN}$", "description": "1-64 of `A-Z a-z 0-9 . _ -`"},
    "MessageId": {
        "type": "string",
        "pattern": f"^{ID_PATTERN}$",
        "description": "16 lowercase hex digits: the delivery hour, then the index in that hour.",
    },
    "Message": {
        "type": "object",
        "description": "A message to schedule. Exactly one of `body` and `body_b64`; at most one of "
        "`deliver_at`, `deliver_after` and `delay_level` (none: deliver now). A deliver time more than "
        f"{LIMITS.max_delay_ms // 86_400_000} days ahead of the master's clock, or before the epoch, is 422.",
        "required": ["topic"],
        "properties": {
            "topic": ref("Name"),
            "body": {
                "type": "string",
                "description": f"UTF-8 text; at most {LIMITS.max_body_bytes} bytes encoded (413 beyond)",
            },
            "body_b64": {
                "type": "string",
                "pattern": f"^{BASE64_PATTERN}$",
                "description": f"standard base64 with padding; at most {LIMITS.max_body_bytes} bytes decoded "
                "(413 beyond)",
            },
            "tags": {
                "oneOf": [ref("Tag"), {"type": "array", "maxItems": MAX_TAGS, "items": ref("Tag")}],
                "description": "one tag, or a list of them",
            },
            "deliver_at": DELIVER_AT,
            "deliver_after": DELIVER_AFTER,
            "delay_level": {
                "type": "integer",
                "minimum": 1,
                "maximum": len(DELAY_LEVELS_MS),
                "description": "RocketMQ's: 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
            },
            "key": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_KEY,
                "description": "idempotency key: the same (topic, key) names the same message while it is "
                "kept, and cancels by key",
            },
            "max_lateness": {
                **DELIVER_AFTER,
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
                "propertyNames": {"maxLength": MAX_HEADER_NAME},
                "additionalProperties": {"type": "string", "maxLength": MAX_HEADER_VALUE},
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
    "Scheduled": {
        "type": "object",
        "required": ["id", "topic", "deliver_at"],
        "properties": {"id": ref("MessageId"), "topic": ref("Name"), "deliver_at": EPOCH_MS},
        "additionalProperties": False,
    },
    "Batch": _batch(
        ref("Message"),
        "Each item is a `Message`; an item that is not gets `{error}` in its place in `results`, and "
        "the others are stored all the same.",
    ),
    "BatchResults": {
        "type": "object",
        "required": ["results"],
        "properties": {
            "results": {
                "type": "array",
                "description": "one per item, in order",
                "items": {"oneOf": [ref("BatchScheduled"), ref("Error")]},
            }
        },
        "additionalProperties": False,
    },
    "BatchScheduled": {
        "type": "object",
        "description": "An item of a batch, stored.",
        "required": ["id", "deliver_at"],
        "properties": {"id": ref("MessageId"), "deliver_at": EPOCH_MS},
        "additionalProperties": False,
    },
    "MessageStatus": {
        "type": "object",
        "required": ["id", "topic", "state", "deliver_at"],
        "properties": {
            "id": ref("MessageId"),
            "topic": ref("Name"),
            "state": {"enum": ["scheduled", "delivered", "cancelled", "dropped", "dead_lettered"]},
            "deliver_at": EPOCH_MS,
            "delivered_at": {**EPOCH_MS, "description": "the master's clock in the entry that delivered it"},
            "late_by_ms": {
                "type": "integer",
                "minimum": 0,
                "description": "how late it was delivered, dropped or dead-lettered (ms after `deliver_at`)",
            },
        },
        "additionalProperties": False,
    },
    "NewTime": {
        "type": "object",
        "description": "Exactly one of `deliver_at` and `deliver_after` (from the master's clock); "
        f"more than {LIMITS.max_delay_ms // 86_400_000} days ahead, or before the epoch, is 422. A time "
        "already past delivers the message at once.",
        "properties": NEW_TIME,
        "additionalProperties": False,
        "allOf": [ONE_NEW_TIME],
    },
    "Rescheduled": {
        "type": "object",
        "required": ["id", "topic", "state", "deliver_at"],
        "properties": {
            "id": ref("MessageId"),
            "topic": ref("Name"),
            "state": {"const": "scheduled"},
            "deliver_at": EPOCH_MS,
        },
        "additionalProperties": False,
    },
    "RescheduleBatch": _batch(
        ref("RescheduleItem"),
        "Each item names a message by `id`, or by `topic` and `key`, and gives its new time; an item "
        "that is not valid, or names no scheduled message, gets `{error}` in its place in `results`.",
    ),
    "RescheduleItem": {
        "type": "object",
        "description": "A message, by `id` or by `topic` and `key`, and its new time.",
        "properties": {
            "id": ref("MessageId"),
            "topic": ref("Name"),
            "key": {"type": "string", "minLength": 1, "maxLength": MAX_KEY},
            **NEW_TIME,
        },
        "additionalProperties": False,
        "allOf": [{"oneOf": [{"required": ["id"]}, {"required": ["topic", "key"]}]}, ONE_NEW_TIME],
    },
    "RescheduleResults": {
        "type": "object",
        "required": ["results"],
        "properties": {
            "results": {
                "type": "array",
                "description": "one per item, in order: the id the message keeps and its new time, "
                "or the error (`not_found`, `already_delivered`, `cancelled`, or a validation error)",
                "items": {"oneOf": [ref("BatchRescheduled"), ref("Error")]},
            }
        },
        "additionalProperties": False,
    },
    "BatchRescheduled": {
        "type": "object",
        "description": "An item of a batch of reschedules, moved.",
        "required": ["id", "state", "deliver_at"],
        "properties": {"id": ref("MessageId"), "state": {"const": "scheduled"}, "deliver_at": EPOCH_MS},
        "additionalProperties": False,
    },
    "Cancelled": {
        "type": "object",
        "required": ["id", "state"],
        "properties": {"id": {"type": "string"}, "state": {"const": "cancelled"}},
        "additionalProperties": False,
    },
    "Pull": {
        "type": "object",
        "required": ["group"],
        "properties": {
            "group": ref("Name"),
            "tags": {
                "type": "string",
                "pattern": f"^{TAG_FILTER_PATTERN}$",
                "description": '`"a||b"`: messages with tag a or b; `"*"` or empty: all',
            },
            "max": {"type": "integer", "minimum": 1, "maximum": MAX_PULL, "default": 32},
            "wait_ms": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_WAIT_MS,
                "default": 0,
                "description": "long poll: answers as soon as anything arrives",
            },
            "visibility_ms": {
                "type": "integer",
                "minimum": MIN_VISIBILITY_MS,
                "maximum": MAX_VISIBILITY_MS,
                "default": 30_000,
                "description": "the lease; a message not acked by then is handed out again",
            },
            "ahead_ms": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_AHEAD_MS,
                "default": 0,
                "description": "hand out messages the wheel fired ahead (fire_lead_ms) up to this long "
                "before their deliver_at; the consumer holds each until then (the SDK's consume does)",
            },
        },
        "additionalProperties": False,
    },
    "Pulled": {
        "type": "object",
        "required": ["messages", "batch_receipts", "clock_ms"],
        "properties": {
            "clock_ms": {
                "type": "integer",
                "description": "the master's clock (epoch ms) as it answered",
            },
            "messages": {"type": "array", "items": ref("PulledMessage")},
            "batch_receipts": {
                "type": "array",
                "items": {"type": "string"},
                "description": "name every message of this answer, one per ready log read",
            },
        },
        "additionalProperties": False,
    },
    "PulledMessage": {
        "type": "object",
        "required": ["id", "receipt", "topic", "tags", "deliver_at", "delivered_at", "attempt", "headers"],
        "properties": {
            "id": ref("MessageId"),
            "receipt": {"type": "string"},
            "topic": {"type": "string", "description": "the topic it was produced to, even for retries"},
            "deliver_at": EPOCH_MS,
            "delivered_at": EPOCH_MS,
            "attempt": {"type": "integer", "minimum": 0},
            "key": PRODUCER_KEY,
            **CONTENT,
        },
        "additionalProperties": False,
        "allOf": [ONE_BODY],
    },
    "Receipts": {
        "type": "object",
        "required": ["group", "receipts"],
        "properties": {
            "group": ref("Name"),
            "receipts": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_PULL,
                "items": {"type": "string"},
                "description": "message receipts or batch receipts a pull handed to this group; any "
                "other string is 400 `invalid_receipt`",
            },
        },
        "additionalProperties": False,
    },
    "Acked": {
        "type": "object",
        "required": ["acked"],
        "properties": {"acked": {"type": "integer", "minimum": 0}},
        "additionalProperties": False,
    },
    "Nacked": {
        "type": "object",
        "required": ["retried", "dead_lettered"],
        "properties": {
            "retried": {"type": "integer", "minimum": 0},
            "dead_lettered": {"type": "integer", "minimum": 0},
        },
        "additionalProperties": False,
    },
    "Release": {
        "type": "object",
        "properties": {"to": {"type": "string", "description": "the node id of the peer to hand over to"}},
        "additionalProperties": False,
    },
    "Released": {
        "type": "object",
        "required": ["old_master", "new_master", "gap_ms", "heard_by"],
        "properties": {
            "old_master": {"type": "string"},
            "new_master": {"type": "string"},
            "gap_ms": {
                "type": ["number", "null"],
                "description": "from stopping the old wheel to the "
                "new master's first sync applied on the old master",
            },
            "heard_by": {"type": "array", "items": {"type": "string"}},
        },
        "additionalProperties": False,
    },
    "Status": {
        "type": "object",
        "required": [
            "node_id",
            "pid",
            "role",
            "leader",
            "term",
            "commit_index",
            "applied_index",
            "raft_log_bytes",
            "snapshot",
            "wheel",
            "clock_ms",
            "clock_offset_ms",
            "clock_handovers",
            "pending",
            "counters",
            "peers",
            "halted",
            "skipped_entries",
            "retention",
        ],  # fmt: skip
        "properties": {
            "node_id": {"type": "string"},
            "pid": {"type": "integer"},
            "role": {"enum": ["master", "follower", "candidate"]},
            "leader": {"type": ["string", "null"]},
            "term": {"type": "integer"},
            "commit_index": {"type": "integer"},
            "applied_index": {"type": "integer"},
            "raft_log_bytes": {"type": "integer"},
            "snapshot": {
                "type": ["object", "null"],
                "description": "the last Raft snapshot this process wrote; null before the first",
                "required": ["index", "seconds", "manifest_bytes", "store_bytes"],
                "properties": {
                    "index": {"type": "integer"},
                    "seconds": {"type": "number"},
                    "manifest_bytes": {"type": "integer"},
                    "store_bytes": {"type": "integer"},
                },
                "additionalProperties": False,
            },
            "wheel": {
                "type": "object",
                "required": ["tick", "local_index", "ms", "syncs_led", "last_sync_led_ms"],
                "properties": {
                    "tick": {"type": "integer"},
                    "local_index": {"type": "integer"},
                    "ms": {"type": "integer"},
                    "syncs_led": {"type": "integer"},
                    "last_sync_led_ms": {"type": ["integer", "null"]},
                },
                "additionalProperties": False,
            },
            "clock_ms": {"type": "integer"},
            "clock_offset_ms": {"type": ["integer", "null"]},
            "clock_handovers": {"type": "integer"},
            "pending": {"type": "integer"},
            "counters": {
                "type": "object",
                "required": list(COUNTERS),
                "properties": {k: {"type": "integer"} for k in COUNTERS},
                "additionalProperties": False,
            },
            "peers": {"type": "array", "items": ref("Peer")},
            "halted": {"type": ["string", "null"], "description": "why this node stopped applying"},
            "skipped_entries": {"type": "integer"},
            "retention": {
                "type": "object",
                "required": ["retention_ms", "retained_from_hour", "cuts_proposed"],
                "properties": {
                    k: {"type": "integer"} for k in ("retention_ms", "retained_from_hour", "cuts_proposed")
                },
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    },
    "Peer": {
        "type": "object",
        "description": "Another node of the cluster, as this one knows it.",
        "required": ["node_id", "raft", "http", "connected"],
        "properties": {
            "node_id": {"type": "string"},
            "raft": {"type": "string"},
            "http": {"type": "string", "description": "URL of its API, scheme included"},
            "connected": {"type": "boolean"},
        },
        "additionalProperties": False,
    },
    "Readiness": {
        "type": "object",
        "required": ["ready", "leader", "halted", "links", "clock"],
        "properties": {
            "ready": {"type": "boolean"},
            "leader": {"type": ["string", "null"]},
            "halted": {"type": ["string", "null"]},
            "links": {"type": "object", "additionalProperties": {"type": "boolean"}},
            "clock": {"type": "boolean", "description": "a majority's clock readings are in"},
        },
        "additionalProperties": False,
    },
    "Forecast": {
        "type": "object",
        "required": ["bucket", "topic", "before", "buckets"],
        "properties": {
            "bucket": ref("BucketSize"),
            "topic": {"type": ["string", "null"], "description": "null: every topic"},
            "before": {"type": "integer", "minimum": 0, "description": "pending due before the first bucket"},
            "buckets": {"type": "array", "items": ref("BucketCount")},
        },
        "additionalProperties": False,
    },
    "BucketSize": {
        "type": "string",
        "enum": ["1m", "1h", "1d"],
        "description": "a minute, an hour or a day, aligned to UTC multiples of it",
    },
    "BucketCount": {
        "type": "object",
        "description": "How many pending messages fall due in the bucket that begins at `start`.",
        "required": ["start", "count"],
        "properties": {"start": EPOCH_MS, "count": {"type": "integer", "minimum": 0}},
        "additionalProperties": False,
    },
    "PendingList": {
        "type": "object",
        "required": ["messages", "next_cursor"],
        "properties": {
            "messages": {"type": "array", "items": ref("PendingMessage")},
            "next_cursor": {"type": ["string", "null"], "description": "null on the last page"},
        },
        "additionalProperties": False,
    },
    "PendingMessage": {
        "type": "object",
        "required": ["id", "deliver_at", "fires_at", "tags", "headers"],
        "properties": {
            "id": ref("MessageId"),
            "deliver_at": EPOCH_MS,
            "fires_at": {**EPOCH_MS, "description": "when the wheel delivers it"},
            "key": PRODUCER_KEY,
            **CONTENT,
        },
        "additionalProperties": False,
    },
    "DlqPeek": {
        "type": "object",
        "required": ["group", "messages", "next_after", "unacked"],
        "properties": {
            "group": ref("Name"),
            "messages": {"type": "array", "items": ref("DlqMessage")},
            "next_after": {"type": ["integer", "null"], "description": "give as `after`; null at the end"},
            "unacked": {"type": "integer", "minimum": 0},
        },
        "additionalProperties": False,
    },
    "DlqMessage": {
        "type": "object",
        "required": ["position", "id", "deliver_at", "delivered_at"],
        "properties": {
            "position": {"type": "integer", "minimum": 0, "description": "in the DLQ's ready log"},
            "id": ref("MessageId"),
            "expired": {**TRUE, "description": "retention removed its data"},
            "topic": {"type": "string"},
            "deliver_at": EPOCH_MS,
            "delivered_at": EPOCH_MS,
            "attempt": {"type": "integer", "minimum": 0},
            "key": PRODUCER_KEY,
            **CONTENT,
        },
        "additionalProperties": False,
    },
    "Requeue": {
        "type": "object",
        "description": "Exactly one of `ids` and `all`.",
        "properties": {
            "ids": {"type": "array", "items": ref("MessageId"), "minItems": 1, "maxItems": MAX_PULL},
            "all": TRUE,
        },
        "additionalProperties": False,
        "allOf": [_one_of("ids", "all")],
    },
    "Requeued": {
        "type": "object",
        "required": ["requeued", "expired", "missing", "remaining"],
        "properties": {
            "requeued": {"type": "array", "items": ref("RequeuedMessage")},
            "expired": {"type": "array", "items": ref("MessageId")},
            "missing": {"type": "array", "items": ref("MessageId")},
            "remaining": {"type": "integer", "minimum": 0},
        },
        "additionalProperties": False,
    },
    "RequeuedMessage": {
        "type": "object",
        "description": "A dead-letter entry produced again: `new_id` is the message made from it.",
        "required": ["id", "position", "topic", "new_id"],
        "properties": {
            "id": ref("MessageId"),
            "position": {"type": "integer", "minimum": 0, "description": "in the DLQ's ready log"},
            "topic": {"type": "string"},
            "new_id": ref("MessageId"),
        },
        "additionalProperties": False,
    },
    "Health": {
        "type": "object",
        "required": ["ok"],
        "properties": {"ok": TRUE},
        "additionalProperties": False,
    },
}


# Recurring schedules (node/http/rules/schedules.py): the message fields are POST /v1/messages' own.
def _any_case(text: str) -> str:
    """A pattern matching ``text`` in any letter case (JSON Schema patterns take no flags)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in text)


_MESSAGE = SCHEMAS["Message"]["properties"]
SCHEDULE_INSTANT = {
    "oneOf": [
        {**EPOCH_MS, "maximum": LAST_INSTANT_MS, "description": "Unix epoch milliseconds, up to year 9999"},
        {"type": "string", "format": "date-time", "description": "RFC 3339, with a zone"},
    ],
}
SCHEMAS |= {
    "NewSchedule": {
        "type": "object",
        "description": "A recurring schedule: each fire time of `cron` in `timezone` produces a message "
        "to `topic`, keyed `schedule:<name>:<fire epoch ms>`. Exactly one of `body` and `body_b64`. "
        "A `cron` that never fires is 422; a `timezone` that is not an IANA zone name is 400.",
        "required": ["name", "topic", "cron", "timezone"],
        "properties": {
            "name": ref("Name"),
            "topic": ref("Name"),
            "body": _MESSAGE["body"],
            "body_b64": _MESSAGE["body_b64"],
            "tags": _MESSAGE["tags"],
            "headers": {
                **_MESSAGE["headers"],
                "maxProperties": MAX_SCHEDULE_HEADERS,
                "propertyNames": {
                    "maxLength": MAX_HEADER_NAME,
                    "not": {"pattern": f"^{_any_case(SCHEDULE_HEADER)}$"},
                },
                "description": f"each firing carries these, and `{SCHEDULE_HEADER}: <name>`",
            },
            "cron": {
                "type": "string",
                "maxLength": MAX_CRON_LENGTH,
                "pattern": f"^{CRON_PATTERN}$",
                "description": "5 fields (minute hour day-of-month month day-of-week), or 6 with seconds "
                "first, one space apart; croniter's syntax, without `H` and `R`",
                "examples": ["*/5 * * * *", "0 30 9 * * MON-FRI"],
            },
            "timezone": {
                "type": "string",
                "minLength": 1,
                "maxLength": 64,
                "description": "an IANA zone name, e.g. `Europe/Berlin` or `UTC`",
                "examples": ["Europe/Berlin", "UTC"],
            },
            "start_at": {**SCHEDULE_INSTANT, "description": "no fire time before it"},
            "end_at": {**SCHEDULE_INSTANT, "description": "fire times before it only; after `start_at`"},
        },
        "additionalProperties": False,
        "allOf": [ONE_BODY],
    },
    "Schedule": {
        "type": "object",
        "required": [
            "name",
            "topic",
            "cron",
            "timezone",
            "state",
            "tags",
            "headers",
            "start_at",
            "end_at",
            "created_at",
            "planned_until",
            "next_fires",
        ],  # fmt: skip
        "properties": {
            "name": ref("Name"),
            "topic": ref("Name"),
            "cron": {"type": "string"},
            "timezone": {"type": "string"},
            "state": {
                "enum": ["active", "paused", "ended"],
                "description": "`ended`: `end_at` is set and no fire time is left before it",
            },
            **CONTENT,
            "start_at": {"type": ["integer", "null"]},
            "end_at": {"type": ["integer", "null"]},
            "created_at": {**EPOCH_MS, "description": "the master's clock in the entry that created it"},
            "planned_until": {
                "type": ["integer", "null"],
                "description": "the replicated mark: every fire time up to it was produced (or skipped while "
                "paused); planning goes on from it",
            },
            "next_fires": {
                "type": "array",
                "maxItems": 5,
                "items": EPOCH_MS,
                "description": "the next five fire times after now; none while paused",
            },
        },
        "additionalProperties": False,
        "allOf": [ONE_BODY],
    },
    "ScheduleList": {
        "type": "object",
        "required": ["schedules"],
        "properties": {"schedules": {"type": "array", "items": ref("Schedule")}},
        "additionalProperties": False,
    },
    "ScheduleDeleted": {
        "type": "object",
        "required": ["name", "state"],
        "properties": {"name": ref("Name"), "state": {"const": "deleted"}},
        "additionalProperties": False,
    },
}


# Push subscriptions (node/http/rules/push.py).
def _push_number(name: str, description: str) -> dict:
    default, low, high = NUMBERS[name]
    return {
        "type": "integer",
        "minimum": low,
        "maximum": high,
        "default": default,
        "description": description,
    }


PUSH_TAGS = {
    "type": "string",
    "pattern": f"^{TAG_FILTER_PATTERN}$",
    "description": 'as a pull takes it: `"a||b"`, or `"*"` (the default) for every message',
}
SCHEMAS |= {
    "NewSubscription": {
        "type": "object",
        "required": ["push"],
        "properties": {
            "push": {
                "type": "object",
                "required": ["url", "secret"],
                "properties": {
                    "url": {
                        "type": "string",
                        "maxLength": MAX_URL,
                        "pattern": f"^{URL_PATTERN}$",
                        "description": "http:// or https://, no user or password; its host must be allowed "
                        "by the master's `push_allow` (422 `push_target_not_allowed` otherwise)",
                    },
                    "secret": {
                        "type": "string",
                        "pattern": f"^{SECRET_PATTERN}$",
                        "description": "16-256 printable ASCII characters: the key of `Horologe-Signature`. "
                        "Never answered back",
                    },
                    "timeout_ms": _push_number("timeout_ms", "a request not answered by then failed"),
                    "max_in_flight": _push_number("max_in_flight", "requests open at once, at most"),
                    "rate_per_s": _push_number(
                        "rate_per_s", "requests started per second, at most; 0: no limit"
                    ),
                    "tags": PUSH_TAGS,
                },
                "additionalProperties": False,
            }
        },
        "additionalProperties": False,
    },
    "Subscription": {
        "type": "object",
        "required": ["topic", "group", "push", "allowed", "created_at", "updated_at", "counters", "unacked"],
        "properties": {
            "topic": ref("Name"),
            "group": ref("Name"),
            "push": {
                "type": "object",
                "required": ["url", "timeout_ms", "max_in_flight", "rate_per_s", "tags"],
                "properties": {
                    "url": {"type": "string"},
                    "timeout_ms": {"type": "integer"},
                    "max_in_flight": {"type": "integer"},
                    "rate_per_s": {"type": "integer"},
                    "tags": {"type": "string"},
                },
                "additionalProperties": False,
                "description": "as put, without the secret",
            },
            "allowed": {
                "type": "boolean",
                "description": "whether this master's `push_allow` may push to the URL (nodes may differ)",
            },
            "created_at": EPOCH_MS,
            "updated_at": EPOCH_MS,
            "counters": {
                "type": "object",
                "required": ["delivered", "retried", "dead_lettered", "in_flight"],
                "properties": {
                    k: {"type": "integer", "minimum": 0}
                    for k in ("delivered", "retried", "dead_lettered", "in_flight")
                },
                "additionalProperties": False,
                "description": "what this master pushed since it became master: acked on a 2xx, "
                "nacked to a retry level, moved to the DLQ; requests open now",
            },
            "unacked": {
                "type": "integer",
                "minimum": 0,
                "description": "messages of the topic's ready log the group has not acked: the backlog",
            },
        },
        "additionalProperties": False,
    },
    "SubscriptionDeleted": {
        "type": "object",
        "required": ["topic", "group", "state"],
        "properties": {"topic": ref("Name"), "group": ref("Name"), "state": {"const": "deleted"}},
        "additionalProperties": False,
    },
}
