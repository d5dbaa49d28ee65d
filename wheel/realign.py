"""Takeover (docs/wheel.md, "Takeover"): a new master lines the committed wheel state up with its clock."""

from __future__ import annotations

from dataclasses import dataclass

from .watermark import Watermark

DEFAULT_BATCH_LIMIT = 10_000


@dataclass(frozen=True)
class Sleep:
    """The tick is ahead of this node's clock: deliver nothing until the clock reaches it."""

    until_ms: int


@dataclass(frozen=True)
class FastForward:
    """The tick is behind: deliver the expired span at once, ``batch_limit`` refs at a time."""

    from_ms: int
    to_ms: int
    batch_limit: int = DEFAULT_BATCH_LIMIT


def realign(ws: Watermark, now_ms: int, batch_limit: int = DEFAULT_BATCH_LIMIT) -> Sleep | FastForward:
    if ws.ms > now_ms:
        return Sleep(ws.ms)
    return FastForward(ws.ms, now_ms, batch_limit)
