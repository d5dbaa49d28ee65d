"""Replicated log entries: one msgpack map per entry, with a type tag.

Every entry carries the master's wheel state ``ws`` (wheel.Watermark wire form) and
its clock reading ``clock_ms``; applying an entry first advances the watermark to
``ws`` (delivering what that passes), then does the entry's own work::

    {"t": "P", "ws": ws, "clock_ms": int, "cols": [topics, bodies, deliver_at_ms,
              produced_at_ms, keys, tags, headers, attempts]}           produce
    {"t": "S", "ws": ws, "clock_ms": int}                               sync / deliver
    {"t": "C", "ws": ws, "clock_ms": int, "ids": [id], "keys": [[topic, key]]}   cancel
    {"t": "M", "ws": ws, "clock_ms": int, "ids": [id], "keys": [[topic, key]],
     "at": [deliver_at_ms, ...]}                                        reschedule: one time
                                                                        per id, then per key
    {"t": "X", "ws": ws, "clock_ms": int, "node": str}                  release marker
    {"t": "A", "ws": ws, "clock_ms": int, "acks": [[group, topic, lo, hi], ...],
     "leases"?: [[group, topic, lo, hi, until_ms, token?, pull_id?], ...]}  ack, and leases
                                       (offsets lo <= o < hi; [group, topic, offset] is read too;
                                        leases: cluster/leases.py, applied before the acks)
    {"t": "R", "ws": ws, "clock_ms": int,
     "retries": [[group, topic, offset, deliver_at_ms], ...]}           nack: retry, or
                                                                        DLQ when deliver_at_ms < 0
    {"t": "T", "ws": ws, "clock_ms": int, "hour": int,
     "ready": [[topic, offset], ...]}                                   retention: cut hours before
                                                                        hour, ready logs below offset
    {"t": "K", "ws": ws, "clock_ms": int,
     "sched": {"op": create|pause|resume|delete, "name": str, "def"?: {...}}}  a recurring schedule
    {"t": "F", "ws": ws, "clock_ms": int,
     "fires": [[name, incarnation, from_mark, to_mark, [fire_ms, ...]], ...]}  its firings
                                        (cluster/schedule_state.py, cluster/schedule_apply.py)
    {"t": "U", "ws": ws, "clock_ms": int,
     "sub": {"op": put|delete, "topic": str, "group": str, "def"?: {...}}}  a push subscription
                                        (cluster/push_state.py, cluster/push_apply.py)

``topic`` and ``offset`` name a ready-log entry; ``offset`` is its number.

A produce entry carries its messages as columns (storage.MessageColumns): ``topics``,
``bodies`` and ``keys`` are lists with one item per message (a key may be nil);
``deliver_at_ms`` and ``produced_at_ms`` are bin, one little-endian i64 per message;
``tags``, ``headers`` and ``attempts`` are sparse, lists of ``[position, value]`` for
the messages that have them. Entries written before columns hold ``"msgs"`` instead,
one ``[topic, body, deliver_at_ms, produced_at_ms, tags, key, headers, attempt]`` per
message, and still decode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import msgpack
import numpy as np

from horologe.storage import Message, MessageColumns
from horologe.wheel import Watermark

from .errors import BadEntryError
from .leases import lease_item
from .schedule_state import Firings


class EntryKind(StrEnum):
    """The type tag ``t`` of an entry (the wire keeps the one-letter string)."""

    PRODUCE = "P"
    SYNC = "S"
    CANCEL = "C"
    RELEASE = "X"
    ACK = "A"
    RETRY = "R"
    TRIM = "T"
    MOVE = "M"
    SCHEDULE = "K"
    FIRE = "F"
    SUBSCRIBE = "U"


PRODUCE, SYNC, CANCEL, RELEASE, ACK, RETRY, TRIM, MOVE, SCHEDULE, FIRE, SUBSCRIBE = EntryKind


@dataclass(frozen=True)
class Entry:
    kind: EntryKind
    ws: Watermark
    clock_ms: int
    messages: MessageColumns | list[Message] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    keys: list[tuple[str, str]] = field(default_factory=list)
    node: str = ""
    acks: list[tuple[str, str, int, int]] = field(default_factory=list)  # group, topic, lo, hi
    retries: list[tuple[str, str, int, int]] = field(default_factory=list)
    hour: int = 0  # TRIM: cut the hours before this one
    ready: list[tuple[str, int]] = field(default_factory=list)  # TRIM: (topic, offset) to trim below
    deliver_at: list[int] = field(default_factory=list)  # MOVE: the new times, ids' then keys'
    schedule: dict = field(default_factory=dict)  # SCHEDULE: {op, name, def?}
    fires: list[Firings] = field(default_factory=list)  # FIRE: per schedule, its fire times
    subscription: dict = field(default_factory=dict)  # SUBSCRIBE: {op, topic, group, def?}
    # ACK: group, topic, lo, hi, until_ms[, token[, pull_id]]
    leases: list[tuple] = field(default_factory=list)

    def encode(self) -> bytes:
        d: dict = {"t": self.kind, "ws": self.ws.to_wire(), "clock_ms": self.clock_ms}
        if self.kind == PRODUCE:
            d["cols"] = _columns_wire(self.messages)
        elif self.kind in (CANCEL, MOVE):
            d["ids"] = self.ids
            d["keys"] = [list(k) for k in self.keys]
            if self.kind == MOVE:
                d["at"] = self.deliver_at
        elif self.kind == RELEASE:
            d["node"] = self.node
        elif self.kind == ACK:
            d["acks"] = [list(a) for a in self.acks]
            if self.leases:
                d["leases"] = [list(lease) for lease in self.leases]
        elif self.kind == RETRY:
            d["retries"] = [list(r) for r in self.retries]
        elif self.kind == TRIM:
            d["hour"] = self.hour
            d["ready"] = [list(r) for r in self.ready]
        elif self.kind == SCHEDULE:
            d["sched"] = self.schedule
        elif self.kind == FIRE:
            d["fires"] = [f.to_wire() for f in self.fires]
        elif self.kind == SUBSCRIBE:
            d["sub"] = self.subscription
        return msgpack.packb(d, use_bin_type=True)


ACK_OVERHEAD = 25  # an ack's bytes in an A entry besides its names, at most (see ack_bytes)
INT_BYTES = 9  # a msgpack int, at most


def ack_bytes(acks: list[tuple]) -> int:
    """What ``acks`` take in an encoded A entry, at most: per ack its names' UTF-8 bytes
    and ``ACK_OVERHEAD`` (a msgpack array head, two str heads of up to 3 bytes, two ints
    of up to 9). With 128-character group and topic names that is 281 bytes an ack. A
    lease item (5 to 7 fields: cluster/leases.py) takes ``INT_BYTES`` more per int, and
    its pull's name its UTF-8 bytes and a str head."""
    return sum(
        len(a[0].encode())
        + len(a[1].encode())
        + ACK_OVERHEAD
        + INT_BYTES * (min(len(a), 6) - 4)
        + (len(a[6].encode()) + 3 if len(a) > 6 else 0)
        for a in acks
    )


def decode(blob: bytes) -> Entry:
    try:
        d = msgpack.unpackb(blob, raw=False)
        kind = EntryKind(d["t"])  # ValueError for an unknown type
        ws = Watermark.from_wire(d["ws"])
        msgs = _columns(d["cols"]) if "cols" in d else _rows(d.get("msgs", ()))
        return Entry(
            kind,
            ws,
            int(d["clock_ms"]),
            msgs,
            list(d.get("ids", ())),
            [tuple(k) for k in d.get("keys", ())],
            d.get("node", ""),
            [_ack_range(*a) for a in d.get("acks", ())],
            [(str(g), str(t), int(o), int(at)) for g, t, o, at in d.get("retries", ())],
            int(d.get("hour", 0)),
            [(str(t), int(o)) for t, o in d.get("ready", ())],
            [int(at) for at in d.get("at", ())],
            schedule=dict(d.get("sched", {})),
            fires=[Firings.from_wire(f) for f in d.get("fires", ())],
            subscription=dict(d.get("sub", {})),
            leases=[lease_item(lease) for lease in d.get("leases", ())],
        )
    except (ValueError, TypeError, KeyError, OverflowError, msgpack.UnpackException) as e:
        raise BadEntryError(f"undecodable entry: {e}") from e


def _columns_wire(messages: MessageColumns | list[Message]) -> list:
    cols = messages if isinstance(messages, MessageColumns) else MessageColumns.from_messages(messages)
    return [
        cols.topics,
        cols.bodies,
        cols.deliver_at_ms.astype("<i8").tobytes(),
        cols.produced_at_ms.astype("<i8").tobytes(),
        cols.keys,
        list(cols.tags.items()),  # (position, tag tuple) pairs: packed as [i, [tags]]
        [[i, h] for i, h in cols.headers.items()],
        [[i, a] for i, a in cols.attempts.items()],
    ]


def _columns(wire) -> MessageColumns:
    topics, bodies, deliver_at, produced_at, keys, tags, headers, attempts = wire
    return MessageColumns(
        list(topics),
        list(bodies),
        np.frombuffer(deliver_at, dtype="<i8").astype(np.int64),
        np.frombuffer(produced_at, dtype="<i8").astype(np.int64),
        list(keys),
        {int(i): tuple(tg) for i, tg in tags},
        {int(i): dict(h) for i, h in headers},
        {int(i): int(a) for i, a in attempts},
    )


def _rows(msgs) -> MessageColumns:
    """The messages of an entry written before columns."""
    return MessageColumns.from_messages(
        [Message(t, b, da, pa, tuple(tg), k, h, at) for t, b, da, pa, tg, k, h, at in msgs]
    )


def _ack_range(group, topic, lo, hi=None) -> tuple[str, str, int, int]:
    """An ack's ``[group, topic, lo, hi]``; ``[group, topic, offset]`` from before ranges."""
    return str(group), str(topic), int(lo), int(lo) + 1 if hi is None else int(hi)
