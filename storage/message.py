"""A message as the storage engine keeps it, and its delay-log record encoding.

A delay-log record is a msgpack map with exactly these keys::

    id              str   16 hex digits, see message_id
    topic           str
    tags            [str]
    body            bin
    deliver_at_ms   int   when the producer asked for it (epoch ms)
    key             str | nil   optional producer key (idempotency, cancel-by-key)
    headers         {str: str}
    attempt         int   0 on first delivery, +1 per retry
    produced_at_ms  int   the master's clock when it accepted the message
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack
import msgspec
import numpy as np

from .errors import CorruptLogError, DeliverTimeOutOfRangeError, InvalidMessageError
from .message_id import ID_LENGTH, MessageId, id_digits

# A record's keys in the order encode_records writes them.
RECORD_ORDER = ("id", "topic", "tags", "body", "deliver_at_ms", "key", "headers", "attempt", "produced_at_ms")
RECORD_KEYS = frozenset(RECORD_ORDER)


@dataclass(frozen=True, slots=True)
class Message:
    topic: str
    body: bytes
    deliver_at_ms: int
    produced_at_ms: int
    tags: tuple[str, ...] = ()
    key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    attempt: int = 0


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: MessageId
    message: Message


@dataclass(frozen=True, slots=True)
class MessageLimits:
    max_body_bytes: int = 256 * 1024
    max_delay_ms: int = 400 * 24 * 3600 * 1000

    def validate(self, msg: Message) -> None:
        """Refuse a message before anything is written; the field names the culprit."""
        if not isinstance(msg.body, bytes | bytearray):
            raise InvalidMessageError("body must be bytes", "body")
        if len(msg.body) > self.max_body_bytes:
            raise InvalidMessageError(
                f"body is {len(msg.body)} bytes; the limit is {self.max_body_bytes}", "body"
            )
        if not msg.topic:
            raise InvalidMessageError("topic must not be empty", "topic")
        if msg.deliver_at_ms < 0:
            raise DeliverTimeOutOfRangeError("deliver_at is before the epoch", "deliver_at")
        if msg.deliver_at_ms - msg.produced_at_ms > self.max_delay_ms:
            raise DeliverTimeOutOfRangeError(
                f"deliver_at is {msg.deliver_at_ms - msg.produced_at_ms} ms ahead; "
                f"the maximum delay is {self.max_delay_ms} ms",
                "deliver_at",
            )
        if msg.attempt < 0:
            raise InvalidMessageError("attempt must be >= 0", "attempt")


RECORD_MAP_HEAD = b"\x89"  # a record's first byte: a map of the 9 RECORD_KEYS
# The same keys and values as one flat array of 18 items (array 16: 0xdc, two length bytes).
FLAT_RECORD_HEAD = b"\xdc\x00\x12"


def encode_record(mid: MessageId, msg: Message) -> bytes:
    return encode_records(
        [str(mid)],
        [msg.topic],
        [list(msg.tags)],
        [msg.body],
        [msg.deliver_at_ms],
        [msg.key],
        [msg.headers],
        [msg.attempt],
        [msg.produced_at_ms],
    )[0]


class _Record(msgspec.Struct):
    """A record's fields in RECORD_ORDER: msgspec packs a struct as the map of its fields
    in this order, in one call each (the values are packed as they are, not converted)."""

    id: Any
    topic: Any
    tags: Any
    body: Any
    deliver_at_ms: Any
    key: Any
    headers: Any
    attempt: Any
    produced_at_ms: Any


assert _Record.__struct_fields__ == RECORD_ORDER
_encode = msgspec.msgpack.Encoder().encode


def encode_records(
    ids, topics, tags, bodies, deliver_at_ms, keys, headers, attempts, produced_at_ms
) -> list[bytes]:
    """The records of many messages, one per position of the given columns (sequences of
    plain values of one length). Each is the map of RECORD_KEYS in RECORD_ORDER."""
    columns = (ids, topics, tags, bodies, deliver_at_ms, keys, headers, attempts, produced_at_ms)
    if len({len(c) for c in columns}) > 1:
        raise ValueError(f"columns of unequal lengths: {[len(c) for c in columns]}")
    return list(map(_encode, map(_Record, *columns)))


_ID_KEY = b"\xa2id\xb0"  # after the map's head: "id", then a str of 16 bytes (ID_LENGTH)


def record_names(payload: bytes, mid: MessageId) -> bool:
    """Whether record ``payload`` is message ``mid``'s, by the id that encode_record
    writes first, without decoding the rest. False for a record written another way."""
    return payload[1:21] == _ID_KEY + str(mid).encode()


def records_name(
    raw: np.ndarray, firsts: np.ndarray, lengths: np.ndarray, hour: int, gis: np.ndarray
) -> np.ndarray:
    """``record_names`` for many records at once: which of the records at ``firsts``
    (``lengths`` long) in byte array ``raw`` are those of messages ``hour``/``gis``."""
    head = np.frombuffer(_ID_KEY, dtype=np.uint8)
    at = np.minimum(firsts[:, None] + np.arange(1, 1 + len(head) + ID_LENGTH), len(raw) - 1)
    got = raw[at]
    want = id_digits(hour, gis)
    return (
        (lengths > len(head) + ID_LENGTH)
        & (got[:, : len(head)] == head).all(axis=1)
        & (got[:, len(head) :] == want).all(axis=1)
    )


def unpack_record(payload: bytes) -> dict:
    """The fields of a record that was read checked (HourBucket.read_records)."""
    return msgpack.unpackb(payload, raw=False)


def decode_record(payload: bytes, path: str, offset: int, expect: MessageId | None = None) -> StoredMessage:
    """The record in ``payload`` (read at ``offset`` of ``path``). With ``expect``, the
    record must be that message (the index's word for it); its id is then not parsed."""
    try:
        rec = msgpack.unpackb(payload, raw=False)
        if not isinstance(rec, dict) or rec.keys() != RECORD_KEYS:
            raise ValueError("unexpected record keys")
        msg = Message(
            topic=rec["topic"],
            body=rec["body"],
            deliver_at_ms=rec["deliver_at_ms"],
            produced_at_ms=rec["produced_at_ms"],
            tags=tuple(rec["tags"]),
            key=rec["key"],
            headers=rec["headers"],
            attempt=rec["attempt"],
        )
        if expect is None:
            return StoredMessage(MessageId.parse(rec["id"]), msg)
        mid = rec["id"]
        good = len(mid) == ID_LENGTH and int(mid, 16) == expect.hour << 32 | expect.global_index
    except (ValueError, TypeError, KeyError, msgpack.UnpackException) as e:
        raise CorruptLogError(path, offset, f"undecodable record: {e}") from e
    if not good:
        raise CorruptLogError(path, offset, f"record is {rec['id']!r}, index says {expect}")
    return StoredMessage(expect, msg)
