"""Recurring schedules as the replicated state holds them: in the store's small meta.

Schedules are few (at most ``MAX_SCHEDULES``), so each lives in meta, under three kinds
of key, all msgpack values written by applying ``K`` and ``F`` entries
(cluster/schedule_apply.py):

* ``schedules``: the names, sorted;
* ``schedule/<name>``: the definition (:class:`ScheduleDef`), rewritten only by a
  create, pause, resume or delete;
* ``schedule_mark/<name>``: where planning stands (:class:`ScheduleMark`), rewritten by
  every ``F`` entry: every fire time up to ``mark`` was produced (or skipped on
  purpose: before the schedule existed, or while it was paused), and ``planned`` lists
  the fire times produced recently (the last minute, and all ahead) and those whose
  firing still waits (the wheel has not reached it: a catch-up; or rescheduled later:
  the latest ``PLANNED_MOVED_KEPT``), which a pause or a delete cancels by key. It
  stays after a delete, as a floor for a schedule created again under the same name
  (cluster/schedule_apply.py), until the time it names has passed.

Kept apart from the definition so that an ``F`` entry rewrites a few numbers, not the body.

Each firing is a message keyed ``schedule:<name>:<fire epoch ms>`` (:func:`fire_key`):
the store's key index makes a second produce of the same firing a no-op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

NAMES_KEY = "schedules"
DEF_PREFIX = "schedule/"
MARK_PREFIX = "schedule_mark/"
KEY_PREFIX = "schedule:"
SCHEDULE_HEADER = "x-horologe-schedule"  # each firing names its schedule
MAX_SCHEDULES = 1000
PLANNED_KEPT_MS = 60_000  # fire times this far behind the clock stay in ``planned``
# ... and, of those further behind whose firing still waits (rescheduled later), the latest
# this many: each F entry looks each one up, and rewrites the mark with them.
PLANNED_MOVED_KEPT = 100


def fire_key(name: str, fire_ms: int) -> str:
    """The producer key of one firing (DESIGN §6)."""
    return f"{KEY_PREFIX}{name}:{fire_ms}"


def def_key(name: str) -> str:
    return f"{DEF_PREFIX}{name}"


def mark_key(name: str) -> str:
    return f"{MARK_PREFIX}{name}"


@dataclass(frozen=True)
class ScheduleDef:
    """What a create asked for, and whether the schedule is paused.

    ``incarnation`` is the Raft index of the entry that created it: a schedule deleted
    and created again under the same name is another one, and an ``F`` entry planned for
    the first one does nothing to the second.
    """

    name: str
    topic: str
    body: bytes
    cron: str
    timezone: str
    tags: tuple[str, ...] = ()
    headers: dict[str, str] = field(default_factory=dict)
    start_at: int | None = None  # first fire time allowed (inclusive)
    end_at: int | None = None  # fire times before it only
    paused: bool = False
    created_at: int = 0  # the master's clock in the create entry
    incarnation: int = 0

    def to_wire(self) -> dict:
        d = asdict(self)
        d["tags"] = list(self.tags)
        return d

    @classmethod
    def from_wire(cls, d: dict) -> ScheduleDef:
        return cls(**{**d, "tags": tuple(d.get("tags", ())), "headers": dict(d.get("headers", {}))})

    def same_request(self, other: ScheduleDef) -> bool:
        """Whether ``other`` asks for the same schedule (a create retried, say)."""
        mine = replace(self, paused=False, created_at=0, incarnation=0)
        return mine == replace(other, paused=False, created_at=0, incarnation=0)

    def allows(self, fire_ms: int) -> bool:
        """Whether a fire time lies within ``[start_at, end_at)``."""
        return (self.start_at is None or fire_ms >= self.start_at) and (
            self.end_at is None or fire_ms < self.end_at
        )


@dataclass(frozen=True)
class ScheduleMark:
    incarnation: int
    mark: int  # every fire time <= mark was produced, or skipped on purpose
    planned: tuple[int, ...] = ()  # fire times produced lately (see PLANNED_KEPT_MS)

    def to_wire(self) -> dict:
        return {"inc": self.incarnation, "mark": self.mark, "planned": list(self.planned)}

    @classmethod
    def from_wire(cls, d: dict) -> ScheduleMark:
        return cls(int(d["inc"]), int(d["mark"]), tuple(int(p) for p in d.get("planned", ())))


@dataclass(frozen=True)
class Firings:
    """One schedule's share of an ``F`` entry: its fire times in ``(from_mark, to_mark]``."""

    name: str
    incarnation: int
    from_mark: int
    to_mark: int
    fires: tuple[int, ...]

    def to_wire(self) -> list:
        return [self.name, self.incarnation, self.from_mark, self.to_mark, list(self.fires)]

    @classmethod
    def from_wire(cls, wire) -> Firings:
        name, inc, lo, hi, fires = wire
        return cls(str(name), int(inc), int(lo), int(hi), tuple(int(f) for f in fires))


# How these are read: a committed view's ``reads.meta``, or, inside an apply, the writer's
# ``store.current_meta`` (the open batch's own writes included).
Meta = Callable[..., Any]


def names(meta: Meta) -> list[str]:
    return list(meta(NAMES_KEY) or ())


def definition(meta: Meta, name: str) -> ScheduleDef | None:
    wire = meta(def_key(name))
    return None if wire is None else ScheduleDef.from_wire(wire)


def mark(meta: Meta, name: str) -> ScheduleMark | None:
    wire = meta(mark_key(name))
    return None if wire is None else ScheduleMark.from_wire(wire)
