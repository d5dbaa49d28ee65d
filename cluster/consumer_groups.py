"""Consumer-group progress over a topic's ready log, kept in the replicated meta.

For each (group, ready topic): ``committed``, the offset below which every entry is
acknowledged (or skipped by the group's filter), and the acknowledged offsets above it.
Acks mostly arrive in order, so the set stays small: it folds into ``committed`` as soon
as it is contiguous.

Retries of a group live in the ready log ``%RETRY%<group>`` (the copy's header
``x-horologe-topic`` names the topic it came from); messages past the last retry level
go to ``%DLQ%<group>``, which is consumed like any topic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
ORIGIN_HEADER = "x-horologe-topic"


def progress_key(group: str, topic: str) -> str:
    return f"group/{group}/{topic}"


def retry_topic(group: str) -> str:
    return f"{RETRY_PREFIX}{group}"


def dlq_topic(group: str) -> str:
    return f"{DLQ_PREFIX}{group}"


@dataclass
class GroupProgress:
    committed: int = 0
    acked: set[int] = field(default_factory=set)

    @classmethod
    def from_wire(cls, value: dict | None) -> GroupProgress:
        if not value:
            return cls()
        return cls(int(value["c"]), set(value["a"]))

    def to_wire(self) -> dict:
        return {"c": self.committed, "a": sorted(self.acked)}

    def is_acked(self, offset: int) -> bool:
        return offset < self.committed or offset in self.acked

    def skip_to(self, offset: int) -> GroupProgress:
        """Progress with everything below ``offset`` passed (retention removed it)."""
        if self.committed >= offset:
            return self
        return GroupProgress(offset).ack(a for a in self.acked if a >= offset)

    def ack(self, offsets) -> GroupProgress:
        acked = self.acked | {o for o in offsets if o >= self.committed}
        committed = self.committed
        while committed in acked:
            acked.discard(committed)
            committed += 1
        return GroupProgress(committed, acked)
