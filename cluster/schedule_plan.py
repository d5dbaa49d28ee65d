"""Which firings of recurring schedules the master proposes next, planned on its committed view.

Pure: the meta of a committed state and the master's clock come in as arguments.

**Horizon.** A schedule is planned ahead of the clock by up to ``horizon_ms`` (node
config ``schedule_horizon_ms``, 60 s by default): its firings up to ``now + horizon``
are produced as ordinary messages, each at its fire time and keyed
``schedule:<name>:<fire ms>``, and the wheel delivers them like any other. Planning
refills once less than half the horizon is left (one ``F`` entry per schedule every
half horizon), so a failover never finds the next firings unplanned.

**From the mark.** Planning starts at the schedule's replicated mark, never at the clock:
firings whose time passed while no master planned (a long election, the cluster down)
are still produced, due at once, and delivered late; none is skipped. An ``F`` entry
names the mark it planned from, and applies only if the mark is still there (another
``F`` from a stale view, a pause or a delete in between: it does nothing). A schedule
with nothing to fire within the horizon keeps its mark (no entry at all); the next fire
time after each mark is remembered here, so an idle turn costs no cron work.

**Bounded entries.** One ``F`` entry makes at most ``MAX_FIRES`` firings, and at most
about ``BODY_BUDGET`` bytes of bodies for the apply to write; a schedule behind by more
is planned up to its last firing taken, and the rest on the next turn, at once. That
turn begins with the schedule after it by name (then wraps around), so one far behind
takes turns with the others rather than holding every entry until it caught up.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidScheduleError
from .schedule_state import Firings, Meta, ScheduleDef, ScheduleMark, definition, mark, names
from .schedule_times import fires_after

MAX_FIRES = 1000
BODY_BUDGET = 1 << 20
FIRE_OVERHEAD_BYTES = 256  # a firing's record beside its body: key, headers, framing


@dataclass(frozen=True)
class Plan:
    firings: list[Firings]
    more: bool  # a budget ran out: plan again at once
    # Schedules this node cannot plan, and why (a time zone its tzdata lacks, which the node
    # that took the schedule had): left as they are, while the others are planned.
    failed: tuple[tuple[str, str], ...] = ()


class Planner:
    def __init__(self, horizon_ms: int) -> None:
        self.horizon_ms = horizon_ms
        self._first: dict[tuple[str, int, int], int | None] = {}  # (name, incarnation, mark) -> next fire
        self._after = ""  # a turn cut short: the next begins with the schedule after this one

    def plan(self, meta: Meta, now_ms: int) -> Plan:
        """The firings to propose now, in one entry (none: nothing is due for planning)."""
        until = now_ms + self.horizon_ms
        out: list[Firings] = []
        fires_left, bytes_left = MAX_FIRES, BODY_BUDGET
        more = False
        seen: dict[tuple[str, int, int], int | None] = {}
        failed: list[tuple[str, str]] = []
        every = names(meta)
        last = ""
        for name in [n for n in every if n > self._after] + [n for n in every if n <= self._after]:
            d, m = definition(meta, name), mark(meta, name)
            if d is None or m is None or d.paused or m.incarnation != d.incarnation:
                continue
            if m.mark >= now_ms + self.horizon_ms // 2:
                continue  # planned far enough ahead
            ident = (name, d.incarnation, m.mark)
            try:
                first = seen[ident] = self._first[ident] if ident in self._first else _first_fire(d, m)
            except InvalidScheduleError as e:  # this node cannot read it: the others go on
                failed.append((name, str(e)))
                continue
            if first is None or first > until:
                continue
            cap = min(fires_left, bytes_left // (len(d.body) + FIRE_OVERHEAD_BYTES))
            if cap <= 0:
                more = True
                break
            fires = _fires(d, m, until, cap)
            capped = len(fires) == cap
            more |= capped
            out.append(Firings(name, d.incarnation, m.mark, fires[-1] if capped else until, tuple(fires)))
            last = name
            fires_left -= len(fires)
            bytes_left -= len(fires) * (len(d.body) + FIRE_OVERHEAD_BYTES)
        self._first = seen
        if more:
            self._after = last
        return Plan(out, more, tuple(failed))


def _first_fire(d: ScheduleDef, m: ScheduleMark) -> int | None:
    """The first fire time after the mark that the schedule allows; None once there is none."""
    for f in fires_after(d.cron, d.timezone, m.mark):
        return f if d.end_at is None or f < d.end_at else None
    return None


def _fires(d: ScheduleDef, m: ScheduleMark, until: int, cap: int) -> list[int]:
    out: list[int] = []
    for f in fires_after(d.cron, d.timezone, m.mark):
        if f > until or (d.end_at is not None and f >= d.end_at) or len(out) == cap:
            break
        out.append(f)
    return out


def next_fires(d: ScheduleDef, m: ScheduleMark | None, now_ms: int, n: int = 5) -> list[int]:
    """The next ``n`` times the schedule fires after ``now_ms``, as things stand: the ones
    planned already, then those to be planned after the mark. None while paused."""
    if d.paused or m is None:
        return []
    ahead = [p for p in m.planned if p > now_ms][:n]
    for f in fires_after(d.cron, d.timezone, max(m.mark, now_ms)):
        if len(ahead) >= n or (d.end_at is not None and f >= d.end_at):
            break
        ahead.append(f)
    return ahead
