"""What applying one log entry did (``StateMachine.apply``): the node answers by it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from horologe.storage import MessageId

from .entries import EntryKind


@dataclass
class ApplyResult:
    kind: EntryKind | None = None  # None: nothing applied (skipped, halted or an error)
    raft_index: int = 0
    id_hours: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # PRODUCE:
    id_gis: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # each one's id
    pending_slots: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # wheel.on_append
    # PRODUCE (and the copies a MOVE or F entry files): whether each one was stored by
    # this entry (False: its key named a message already there, whose id it has)
    stored: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    # CANCEL and MOVE: one state per id / key asked (as it was: SCHEDULED for a message moved
    # now), and the id each one resolved to (the id it answers to, once rescheduled)
    cancels: list[str] = field(default_factory=list)
    cancel_ids: list[str | None] = field(default_factory=list)
    delivered: int = 0
    # How long after its slot the wheel delivered each message (ms, by the entry's clock);
    # not those delivered as they arrived, already due.
    wheel_lateness_ms: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    retained_from_hour: int | None = None  # TRIM: where retention now starts
    dead_lettered: int = 0  # RETRY: entries moved to a DLQ (the copies made are ``ids``)
    schedule: str | None = None  # SCHEDULE: what it did (schedule_apply.ScheduleOutcome)
    subscription: str | None = None  # SUBSCRIBE: what it did (push_apply.PushOutcome)
    # (from_ms, gap_ms): leases running at from_ms were moved on by gap_ms (no master served)
    leases_paused: tuple[int, int] | None = None
    error: str | None = None
    skipped: bool = False

    @property
    def ids(self) -> list[MessageId]:
        return list(map(MessageId, self.id_hours.tolist(), self.id_gis.tolist()))
