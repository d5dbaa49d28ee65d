"""What a chaos run saw, as the clients saw it: the input of the checker.

All times are the harness's true wall clock, in epoch ms (nodes' clocks may be skewed).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field, fields


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class History:
    seed: int
    start_ms: int = field(default_factory=now_ms)
    # {id, key, deliver_at, sent_ms, acked_ms}: every produce the cluster acknowledged
    produced: list[dict] = field(default_factory=list)
    # {sent_ms, failed_ms, count, error}: batches the client gave up on (may or may not be stored)
    produce_failures: list[dict] = field(default_factory=list)
    # {id, sent_ms, answered_ms, outcome}: outcome is ok (200), delivered (409), not_found, error
    cancels: list[dict] = field(default_factory=list)
    # {id, key, by ("id" | "key"), batch (bool), new_at, sent_ms, answered_ms, outcome, resent}:
    # one per message a reschedule asked to move; outcome is ok (200), delivered or cancelled
    # (409), not_found, or "error: ..." (no answer: it may or may not have moved); resent:
    # the SDK sent the call more than once (after no answer, a 503 or a redirect), so a 409
    # or 404 may be what an earlier send did (moved it, and it fired since)
    reschedules: list[dict] = field(default_factory=list)
    # {id, receipt, sent_ms (the pull), at_ms (its answer), node, consumer, deliver_at,
    # delivered_at, attempt, key (from the body: a retry copy has a new id, the same body)}
    consumed: list[dict] = field(default_factory=list)
    # {receipts, sent_ms, at_ms (its answer), ok, error}
    acks: list[dict] = field(default_factory=list)
    # {receipts, sent_ms, at_ms, ok, error}: hand-outs sent back for a retry
    nacks: list[dict] = field(default_factory=list)
    # {name, topic, cron, timezone, start_at, end_at, created_ms}: recurring schedules the
    # run created (their window: fire times in [start_at, end_at))
    schedules: list[dict] = field(default_factory=list)
    # {id, key, receipt, sent_ms, at_ms, deliver_at, delivered_at, attempt}: each hand-out
    # of a schedule's firing to its consumer (schedule_load.py)
    schedule_fires: list[dict] = field(default_factory=list)
    # {name, start_ms, end_ms}
    faults: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, kind: str, **event) -> None:
        with self._lock:
            getattr(self, kind).append(event)

    def count(self, kind: str) -> int:
        with self._lock:
            return len(getattr(self, kind))

    def snapshot(self, kind: str) -> list[dict]:
        with self._lock:
            return list(getattr(self, kind))

    def to_dict(self) -> dict:
        with self._lock:
            return {f.name: _copy(getattr(self, f.name)) for f in fields(self) if f.name != "_lock"}

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.to_dict(), f)

    @classmethod
    def load(cls, path: str) -> History:
        with open(path) as f:
            return cls(**json.load(f))


def nacked_not_retried(consumed: list[dict], nacks: list[dict], acks: list[dict]) -> set[str]:
    """Ids handed out and nacked (answered ok) whose retry copy no consumer got yet.

    The copy has an id of its own and the original's body, so it is known by its key. A
    message handed out twice (a lease lost with its master) and acked on one hand-out
    before the nack of the other was answered is owed no copy: a nack applied after the
    ack makes none (docs/api.md). An ack that failed may still have been applied, so it
    excuses the nack too.
    """
    receipt_id = {c["receipt"]: c["id"] for c in consumed}
    acked_from: dict[str, int] = {}  # id -> when the earliest ack of one of its hand-outs was sent
    for a in acks:
        for r in a["receipts"]:
            mid = receipt_id.get(r)
            if mid is not None:
                sent = a.get("sent_ms", a["at_ms"])  # histories before sent_ms was kept
                acked_from[mid] = min(acked_from.get(mid, sent), sent)
    nacked_at = {r: n["at_ms"] for n in nacks if n["ok"] for r in n["receipts"]}
    retried = {c["key"] for c in consumed if c["attempt"] > 0}
    return {
        c["id"]
        for c in consumed
        if c["receipt"] in nacked_at
        and c["key"] not in retried
        and acked_from.get(c["id"], nacked_at[c["receipt"]] + 1) > nacked_at[c["receipt"]]
    }


def _copy(value):
    return list(value) if isinstance(value, list) else value
