"""The pushes of one subscription that ended and are not yet settled, gathered so that one
ack settles every success since the last, and one nack each ``Retry-After`` among the
failures (most have none: one nack). Pure: no I/O, no clock."""

from __future__ import annotations

from collections import defaultdict

from .sender import Sent


class Ended:
    def __init__(self) -> None:
        self.acks: list[str] = []  # receipts of pushes answered 2xx
        self.nacks: dict[int | None, list[str]] = defaultdict(list)  # Retry-After ms -> receipts
        self.unsent: list[str] = []  # receipts of pushes never sent (no connection in time)
        self.count = 0

    def add(self, receipt: str, sent: Sent) -> None:
        if sent.ok:
            self.acks.append(receipt)
        else:
            self.nacks[sent.retry_after_ms].append(receipt)
        self.count += 1

    def add_unsent(self, receipt: str) -> None:
        """A push that found no free connection before its timeout: no attempt, given back."""
        self.unsent.append(receipt)
        self.count += 1

    def take(self) -> Ended:
        """What ended so far, as an :class:`Ended` of its own; this one is empty after."""
        taken = Ended()
        taken.acks, taken.nacks, taken.unsent, taken.count = self.acks, self.nacks, self.unsent, self.count
        self.acks, self.nacks, self.unsent, self.count = [], defaultdict(list), [], 0
        return taken
