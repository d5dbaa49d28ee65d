"""Typed results of the client SDK."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Scheduled:
    id: str
    topic: str
    deliver_at: int  # epoch ms


@dataclass(frozen=True)
class MessageStatus:
    id: str
    topic: str
    state: str  # scheduled | delivered | cancelled
    deliver_at: int
    delivered_at: int | None = None


@dataclass(frozen=True)
class ReceivedMessage:
    id: str
    receipt: str
    topic: str
    body: bytes
    tags: tuple[str, ...]
    deliver_at: int
    delivered_at: int
    attempt: int
    headers: dict[str, str] = field(default_factory=dict)

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
        )
