"""A state machine over a fresh store, and entries applied to it one after another."""

from __future__ import annotations

from horologe.cluster import Entry, StateMachine
from horologe.storage import Storage, StorageConfig
from horologe.wheel import Watermark

T = 1_767_225_600_000  # 2026-01-01 00:00 UTC


def machine(path) -> StateMachine:
    return StateMachine(Storage(str(path), StorageConfig(fsync=False)))


class EntryLog:
    """Entries applied one after another, stamped with a clock the test moves; ``blobs``
    keeps them, for a replay on another machine."""

    def __init__(self, sm: StateMachine) -> None:
        self.sm = sm
        self.index = 0
        self.clock = T
        self.blobs: list[bytes] = []

    def append(self, kind, ws: Watermark | None = None, **fields):
        """Apply one entry of ``kind``; its result."""
        self.index += 1
        blob = Entry(kind, ws or self.sm.ws, self.clock, **fields).encode()
        self.blobs.append(blob)
        return self.sm.apply(self.index, blob)
