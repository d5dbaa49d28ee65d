"""Typed results of the client SDK."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import msgspec

ORIGIN_HEADER = "x-horologe-topic"  # a retry's copy names the topic it came from
ID_HEADER = "x-horologe-id"  # a rescheduled copy or a retry names the id it answers to

# A node's role in /admin/status: master, follower or candidate. Nodes that said "slave" for a
# follower are read as saying "follower", for one release (docs/api.md); then the alias goes.
OLD_ROLES = {"slave": "follower"}


def node_role(role: str) -> str:
    """``role`` as a node said it, with the old word for a follower read as ``follower``."""
    return OLD_ROLES.get(role, role)


@dataclass(frozen=True)
class Scheduled:
    id: str
    topic: str
    deliver_at: int  # epoch ms


@dataclass(frozen=True)
class Rescheduled:
    """One item of a batch reschedule that moved: the id it keeps, and its new time."""

    id: str
    deliver_at: int  # epoch ms


@dataclass(frozen=True)
class MessageStatus:
    id: str
    topic: str
    state: str  # scheduled | delivered | cancelled | dropped | dead_lettered
    deliver_at: int
    delivered_at: int | None = None
    late_by_ms: int | None = None  # how late it was delivered, dropped or dead-lettered


@dataclass(frozen=True)
class Forecast:
    """Pending messages per time bucket (``GET /v1/forecast``)."""

    bucket: str  # 1m | 1h | 1d
    topic: str | None  # None: every topic
    before: int  # pending due before the first bucket (overdue, or before ``from``)
    buckets: list[tuple[int, int]]  # (start epoch ms, count), in time order


@dataclass(frozen=True)
class Backlog:
    """A group's backlog on a topic (``GET /v1/topics/{topic}/groups/{group}``)."""

    topic: str
    group: str
    unacked: int  # delivered messages the group has not acked
    leased: int  # of those, held by a consumer
    waiting: int  # of those, due and waiting for a pull: the queue's length


@dataclass(frozen=True)
class PendingMessage:
    """A scheduled message not yet delivered (``GET /v1/topics/{topic}/pending``)."""

    id: str
    deliver_at: int  # epoch ms, as produced
    fires_at: int  # when the wheel will deliver it (deliver_at, unless it arrived late)
    tags: tuple[str, ...]
    key: str | None
    headers: dict[str, str]
    body: bytes | None  # only when asked for


@dataclass(frozen=True)
class PendingPage:
    messages: list[PendingMessage]
    next_cursor: str | None  # give it back for the next page; None: this was the last


# A stored record's keys in the order the node writes them (storage/message.py's
# RECORD_ORDER), as the flat records of a pull's answer by columns carry them.
_FLAT_KEYS = ("id", "topic", "tags", "body", "deliver_at_ms", "key", "headers", "attempt", "produced_at_ms")


class ReceivedMessage(msgspec.Struct, frozen=True, gc=False):
    """A pulled message: frozen (setting a field raises AttributeError; a copy with other
    fields: ``msgspec.structs.replace``, its fields: ``msgspec.structs.asdict``), compared
    by its fields, pickled; no weak references (msgspec has them only for tracked Structs).

    A msgspec Struct, made in C: a consumer makes one per message, and as a frozen
    dataclass (even made past its ``__init__``, slot by slot) it cost a consumer of a
    pull by columns 0.89 µs a message, 0.46 µs this way (horologe/client/pull_columns.py).
    Not tracked by the cyclic collector (``gc=False``): messages live for a few batches
    (prefetched, then handed over), long enough to reach the oldest generation, whose
    growth starts full collections of the whole heap. Its fields refer to nothing that
    refers back to it (a cycle through one, made by hand, would never be collected)."""

    id: str
    receipt: str
    topic: str
    body: bytes
    tags: tuple[str, ...]
    deliver_at: int
    delivered_at: int
    attempt: int
    headers: dict[str, str] = {}
    key: str | None = None  # the producer's key, when it gave one
    # How often this attempt has been handed out, this time counted: above 1, a lease of
    # it ended or was released before, and another consumer may have had it.
    deliveries: int = 1

    @property
    def text(self) -> str:
        return self.body.decode()

    @classmethod
    def from_json(cls, d: dict) -> ReceivedMessage:
        body = d["body"].encode() if "body" in d else base64.b64decode(d["body_b64"])
        return cls(
            d["id"],
            d["receipt"],
            d["topic"],
            body,
            tuple(d["tags"]),
            d["deliver_at"],
            d["delivered_at"],
            d["attempt"],
            d.get("headers", {}),
            d.get("key"),
            d.get("deliveries", 1),
        )

    @classmethod
    def from_record(cls, record, receipt: str, deliver_at: int, delivered_at: int) -> ReceivedMessage:
        """From a pull's answer as msgpack decodes it: the delay-log record as stored (a
        map), or as the flat tuple of its keys and values that the answer by columns sends
        (read by position when its keys come in the order the node writes them, else by
        key), and what the pull adds (the node's pull_wire). An answer by columns is
        decoded by msgspec instead (horologe/client/pull_columns.py); this reads the other
        layouts, and records written another way."""
        if isinstance(record, dict):
            headers = record["headers"]
            mid, topic, tags, body = record["id"], record["topic"], record["tags"], record["body"]
            attempt, key = record["attempt"], record.get("key")
        elif record[::2] == _FLAT_KEYS:
            mid, topic, tags, body, headers, attempt, key = (
                record[1],
                record[3],
                record[5],
                record[7],
                record[13],
                record[15],
                record[11],
            )
        else:
            return cls.from_record(
                dict(zip(record[::2], record[1::2], strict=True)), receipt, deliver_at, delivered_at
            )
        return cls.renamed(
            mid, receipt, topic, body, tuple(tags), deliver_at, delivered_at, attempt, headers, key
        )

    @classmethod
    def renamed(
        cls, mid, receipt, topic, body, tags, deliver_at, delivered_at, attempt, headers, key
    ) -> ReceivedMessage:
        """A message as its record says, with the id and topic its headers name when they
        do: a rescheduled copy answers to the id it replaced, a retry to its first message's id
        and the topic it came from."""
        if headers:
            mid = headers.get(ID_HEADER, mid)
            topic = headers.get(ORIGIN_HEADER, topic)
        return cls(mid, receipt, topic, body, tags, deliver_at, delivered_at, attempt, headers, key)


class PulledBatch(list):
    """What a pull returns: its messages, as a list, and ``batch_receipts``, receipts that
    name all of them (one per ready log the pull read; empty from a node that does not
    give them). Acking those acks the whole batch in one small request. ``clock_ms``: the
    master's clock as it answered (None from a node that does not say)."""

    def __init__(self, messages=(), batch_receipts=(), clock_ms: int | None = None) -> None:
        super().__init__(messages)
        self.batch_receipts: list[str] = list(batch_receipts)
        self.clock_ms = clock_ms

    def receipts(self) -> list[str]:
        """The fewest receipts that ack every message of the batch."""
        return list(self.batch_receipts) or [m.receipt for m in self]
