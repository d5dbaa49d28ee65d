"""From an input row to a message, validated by the same rules the API applies.

Pure: no Spark. A row is a dict of column -> value. A rejected row gets a reason naming
the field. Without a key column, each row's key is a hash of its mapped content, so a
rerun of the same file, or a retried Spark task, yields the same keys and the cluster
stores nothing twice. Two identical rows are therefore one message; give a key column
to keep them apart.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass

import xxhash

from horologe.storage import InvalidFieldError, MessageLimits
from horologe.storage.message_json import check_message

from .errors import ColumnMappingError

TIME_OPTIONS = ("deliver_at_col", "deliver_after_col", "delay_level_col")
LIMITS = MessageLimits()


@dataclass(frozen=True)
class ColumnMapping:
    body_col: str
    topic: str | None = None
    topic_col: str | None = None
    tags_col: str | None = None
    deliver_at_col: str | None = None
    deliver_after_col: str | None = None
    delay_level_col: str | None = None
    key_col: str | None = None

    def __post_init__(self) -> None:
        if (self.topic is None) == (self.topic_col is None):
            raise ColumnMappingError("give exactly one of --topic and --topic-col")
        if sum(getattr(self, o) is not None for o in TIME_OPTIONS) != 1:
            raise ColumnMappingError(
                "give exactly one of --deliver-at-col, --deliver-after-col, --delay-level-col"
            )

    def columns(self) -> list[str]:
        names = [
            self.body_col,
            self.topic_col,
            self.tags_col,
            self.key_col,
            *(getattr(self, o) for o in TIME_OPTIONS),
        ]
        return [n for n in names if n is not None]

    def time_column(self) -> str:
        return next(getattr(self, o) for o in TIME_OPTIONS if getattr(self, o) is not None)

    def check_columns(self, available: list[str]) -> None:
        missing = [c for c in self.columns() if c not in available]
        if missing:
            raise ColumnMappingError(
                f"no column {', '.join(missing)} in the input; it has {', '.join(available)}"
            )

    def to_message(self, row: dict, now_ms: int) -> dict:
        """The message (SDK ``produce`` keyword arguments); ValueError with a reason if the row is bad."""
        msg: dict = {
            "topic": self.topic if self.topic is not None else row.get(self.topic_col),
            "body": row.get(self.body_col),
        }
        if self.tags_col is not None and row.get(self.tags_col) not in (None, ""):
            tags = row[self.tags_col]
            if isinstance(tags, str):
                msg["tags"] = [t for t in tags.split(",") if t]
            elif isinstance(tags, list | tuple):
                msg["tags"] = list(tags)
            else:
                raise ValueError(f"tags: {self.tags_col} holds {type(tags).__name__}, not a list or text")
        for option, field in zip(TIME_OPTIONS, ("deliver_at", "deliver_after", "delay_level"), strict=True):
            col = getattr(self, option)
            if col is not None:
                value = row.get(col)
                if value is None:
                    raise ValueError(f"{col}: empty")
                msg[field] = _time_value(col, value)
        at = msg.get("deliver_at")
        if type(at) is int and SECONDS_LOOK <= at < MS_LOOK:
            raise ValueError(f"{self.deliver_at_col}: {at} looks like epoch seconds; give epoch milliseconds")
        if msg["body"] is None:
            raise ValueError(f"{self.body_col}: empty")
        msg["body"] = _body(msg["body"])
        key = row.get(self.key_col) if self.key_col is not None else None
        if key not in (None, ""):
            msg["key"] = str(key)
        try:
            check_message(msg, now_ms, LIMITS)
        except InvalidFieldError as e:
            raise ValueError(f"{e.field or 'row'}: {e.message}") from e
        if "key" not in msg:
            msg["key"] = row_key(msg)
        return msg


# An epoch-ms deliver time in [1e9, 1e11) is in 1970 (January to March 1973): most likely
# epoch seconds (2001 to 5138), which as milliseconds would all be due at once.
SECONDS_LOOK, MS_LOOK = 1_000_000_000, 100_000_000_000
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _body(value) -> str | bytes:
    """A body column's value as the message's body: text or bytes as they are, structures
    (a JSON object or array read into a struct, map or list) and scalars as JSON."""
    if isinstance(value, str | bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return json.dumps(value, separators=(",", ":"), default=str)


def _time_value(col: str, value):
    """A time column's value: an integer as it is (from text or a whole float too), a
    timestamp as its epoch ms (the same instant, however the session's zone shows it)."""
    if type(value) is int:
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise ValueError(f"{col}: a timestamp without a time zone ({value.isoformat()})")
        return (value - EPOCH) // datetime.timedelta(milliseconds=1)
    return value if not hasattr(value, "isoformat") else value.isoformat()


def row_key(msg: dict) -> str:
    """A stable key from a message's content (keys must be at most 256 characters)."""
    canonical = json.dumps(msg, sort_keys=True, separators=(",", ":"), default=str)
    return "row-" + xxhash.xxh3_128_hexdigest(canonical.encode())
