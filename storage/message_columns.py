"""A batch of messages as columns: what a produce entry carries and an append stores.

One list or array per field instead of one ``Message`` per message, so that a batch
is checked, placed and indexed with array operations. The fields most messages leave
empty (tags, headers, a retry's attempt) are sparse: a map from position to value.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .message import Message, MessageLimits


@dataclass(frozen=True)
class MessageColumns:
    topics: list[str]
    bodies: list[bytes]
    deliver_at_ms: np.ndarray  # int64
    produced_at_ms: np.ndarray  # int64
    keys: list[str | None]
    tags: dict[int, tuple[str, ...]] = field(default_factory=dict)  # absent: no tags
    headers: dict[int, dict[str, str]] = field(default_factory=dict)  # absent: none
    attempts: dict[int, int] = field(default_factory=dict)  # absent: 0

    def __post_init__(self) -> None:
        n = len(self.topics)
        sizes = (len(self.bodies), len(self.deliver_at_ms), len(self.produced_at_ms), len(self.keys))
        if any(s != n for s in sizes):
            raise ValueError(f"columns of unequal length: {n} topics, then {sizes}")
        if any(not 0 <= i < n for sparse in (self.tags, self.headers, self.attempts) for i in sparse):
            raise ValueError("a sparse column names a position outside the batch")

    @classmethod
    def from_messages(cls, messages: Sequence[Message]) -> MessageColumns:
        return cls(
            [m.topic for m in messages],
            [m.body for m in messages],
            np.array([m.deliver_at_ms for m in messages], dtype=np.int64),
            np.array([m.produced_at_ms for m in messages], dtype=np.int64),
            [m.key for m in messages],
            {i: tuple(m.tags) for i, m in enumerate(messages) if m.tags},
            {i: m.headers for i, m in enumerate(messages) if m.headers},
            {i: m.attempt for i, m in enumerate(messages) if m.attempt},
        )

    @classmethod
    def concat(cls, parts: Sequence[MessageColumns]) -> MessageColumns:
        """The messages of ``parts``, one after another."""
        if len(parts) == 1:
            return parts[0]
        starts = np.cumsum([0] + [len(p) for p in parts[:-1]]).tolist()
        return cls(
            [t for p in parts for t in p.topics],
            [b for p in parts for b in p.bodies],
            np.concatenate([p.deliver_at_ms for p in parts]),
            np.concatenate([p.produced_at_ms for p in parts]),
            [k for p in parts for k in p.keys],
            {at + i: v for at, p in zip(starts, parts, strict=True) for i, v in p.tags.items()},
            {at + i: v for at, p in zip(starts, parts, strict=True) for i, v in p.headers.items()},
            {at + i: v for at, p in zip(starts, parts, strict=True) for i, v in p.attempts.items()},
        )

    def part(self, lo: int, hi: int) -> MessageColumns:
        """Messages ``lo`` to ``hi`` (exclusive)."""
        if lo == 0 and hi == len(self):
            return self
        return MessageColumns(
            self.topics[lo:hi],
            self.bodies[lo:hi],
            self.deliver_at_ms[lo:hi],
            self.produced_at_ms[lo:hi],
            self.keys[lo:hi],
            {i - lo: v for i, v in self.tags.items() if lo <= i < hi},
            {i - lo: v for i, v in self.headers.items() if lo <= i < hi},
            {i - lo: v for i, v in self.attempts.items() if lo <= i < hi},
        )

    def wire_sizes(self) -> np.ndarray:
        """Each message's share of an encoded entry, a little over: its fields in UTF-8 plus
        msgpack's framing (a string's is 5 bytes at most; an entry is cut by these, and
        one over the cap is refused: node/service.py)."""
        sizes = np.fromiter(map(len, self.bodies), dtype=np.int64, count=len(self))
        sizes += np.fromiter(map(_utf8_size, self.topics), dtype=np.int64, count=len(self))
        sizes += np.fromiter((_utf8_size(k) if k else 0 for k in self.keys), dtype=np.int64, count=len(self))
        sizes += 64
        if self.tags:
            at = np.fromiter(self.tags, dtype=np.int64, count=len(self.tags))
            sizes[at] += np.fromiter(map(_tags_size, self.tags.values()), dtype=np.int64, count=len(at))
        for i, headers in self.headers.items():
            sizes[i] += 16 + sum(_utf8_size(k) + _utf8_size(v) + 10 for k, v in headers.items())
        return sizes

    def __len__(self) -> int:
        return len(self.topics)

    def message(self, i: int) -> Message:
        return Message(
            self.topics[i],
            self.bodies[i],
            int(self.deliver_at_ms[i]),
            int(self.produced_at_ms[i]),
            self.tags.get(i, ()),
            self.keys[i],
            self.headers.get(i, {}),
            self.attempts.get(i, 0),
        )

    def attempt_column(self) -> np.ndarray:
        out = np.zeros(len(self), dtype=np.int64)
        for i, a in self.attempts.items():
            out[i] = a
        return out

    def validate(self, limits: MessageLimits) -> None:
        """``limits.validate`` of every message, the first failing one raising, with the
        rules checked on whole columns."""
        if not all(type(b) is bytes for b in self.bodies):
            not_bytes = np.array([not isinstance(b, bytes | bytearray) for b in self.bodies])
            if not_bytes.any():
                self._refuse_first(limits, not_bytes)
        sizes = np.fromiter(map(len, self.bodies), dtype=np.int64, count=len(self))
        bad = (
            (sizes > limits.max_body_bytes)
            | (self.deliver_at_ms < 0)
            | (self.deliver_at_ms - self.produced_at_ms > limits.max_delay_ms)
        )
        bad |= np.fromiter((not t for t in self.topics), dtype=bool, count=len(self))
        for i, a in self.attempts.items():
            bad[i] |= a < 0
        if bad.any():
            self._refuse_first(limits, bad)

    def _refuse_first(self, limits: MessageLimits, bad: np.ndarray) -> None:
        first = int(np.flatnonzero(bad)[0])
        limits.validate(self.message(first))
        raise AssertionError(f"message {first} failed a column check but passes validate")


@functools.lru_cache(maxsize=4096)
def _tags_size(tags: tuple[str, ...]) -> int:
    """What a tag set weighs encoded, a little over (a batch repeats the same few sets)."""
    return 16 + sum(_utf8_size(t) + 5 for t in tags)


def _utf8_size(text: str) -> int:
    """The bytes of ``text`` in UTF-8 (its length, for ASCII, without encoding it)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
