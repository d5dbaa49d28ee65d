"""When a recurring schedule fires: a cron expression read in an IANA time zone's wall time.

Pure: no clock (every instant comes in as epoch ms) and no I/O beyond reading the zone
data of the ``tzdata`` package, the same on every machine that installs this version
(the system's zone files are not read, so nodes on different images agree).

**Cron.** croniter's syntax, in 5 fields (``minute hour day-of-month month day-of-week``)
or 6 with seconds *first* (``second minute hour ...``, as Quartz and Spring write it;
croniter's ``second_at_beginning``), one space apart. Day of month and day of week together match either
(classic cron). Jenkins' hashed ``H`` and croniter's random ``R`` are refused: they do
not name the same times on every call. croniter's 7th (year) field is refused too.

**Wall time.** The expression picks local wall times (croniter on naive datetimes, which
knows nothing of offsets); each is then turned into an instant in the zone:

* a wall time that exists once is that instant;
* one that repeats (the hour clocks go back) fires once, at its *first* occurrence
  (``fold=0``); the second pass through that hour fires nothing, so ``*/15 * * * *``
  fires at 02:00, 02:15, 02:30 and 02:45 once each on 2026-10-25 in Europe/Berlin;
* one that does not exist (the hour clocks skip) fires once, at the next valid instant:
  the end of the gap, so ``30 2 * * *`` fires at 03:00 local on 2026-03-29 in
  Europe/Berlin. Wall times of one gap that map to the same instant fire once.

Instants come out strictly increasing: a wall time that maps to an instant not after
the last one given fires nothing.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.resources
import re
from collections.abc import Iterator
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, CroniterError, croniter

from .errors import InvalidScheduleError

MAX_CRON_LENGTH = 200
# Fields of croniter's characters, one space apart; without anchors, shared with the API's
# JSON Schema (node/http/openapi/schemas.py) and matched whole.
CRON_FIELD = r"[0-9A-Za-z*/,?#-]+"
CRON_PATTERN = rf"{CRON_FIELD}(?: {CRON_FIELD}){{4,5}}"
CRON_RE = re.compile(CRON_PATTERN)
# A field naming a hashed (H) or random (R) value; month and day names (MAR, THU) are words.
UNSTABLE_FIELD = re.compile(r"(?<![A-Za-z])[HhRr](?![A-Za-z])")
NO_FIRE_ZONES = {"Factory"}  # tzdata's placeholder zone: no place keeps its time
MS_PER_S = 1000
LAST_INSTANT_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: datetime goes no further


@functools.cache
def zone_names() -> frozenset[str]:
    """Every IANA zone name the ``tzdata`` package holds."""
    names = importlib.resources.files("tzdata").joinpath("zones").read_text().split()
    return frozenset(names) - NO_FIRE_ZONES


def time_zone(name: str) -> ZoneInfo:
    """The zone ``name`` from the tzdata package (``Europe/Berlin``, ``UTC``)."""
    # Checked before the cache: a name from JSON may be a list, which no cache can hash.
    if not isinstance(name, str) or name not in zone_names():
        raise InvalidScheduleError(
            f"unknown time zone {name!r}; give an IANA name like Europe/Berlin", "timezone"
        )
    return _load_zone(name)


@functools.lru_cache(maxsize=256)
def _load_zone(name: str) -> ZoneInfo:
    area, _, place = name.rpartition("/")
    package = "tzdata.zoneinfo" + ("." + area.replace("/", ".") if area else "")
    with importlib.resources.files(package).joinpath(place).open("rb") as f:
        return ZoneInfo.from_file(f, key=name)


def check_cron(expr: str) -> None:
    """Refuse what croniter cannot read, or what this module does not take (see above)."""
    if not isinstance(expr, str) or not 1 <= len(expr) <= MAX_CRON_LENGTH:
        raise InvalidScheduleError(f"cron must be a string of 1-{MAX_CRON_LENGTH} characters", "cron")
    if not CRON_RE.fullmatch(expr):
        raise InvalidScheduleError(
            "cron must have 5 fields (minute hour day month weekday), or 6 with seconds first, "
            "one space apart",
            "cron",
        )
    if UNSTABLE_FIELD.search(expr):
        raise InvalidScheduleError("cron fields H (hashed) and R (random) are not supported", "cron")
    try:
        _iterator(expr, dt.datetime(2000, 1, 1)).get_next(dt.datetime)
    except CroniterBadDateError as e:  # no match within croniter's 50 years
        raise InvalidScheduleError(f"cron {expr!r} never fires", "cron", "out_of_range") from e
    except (ValueError, TypeError, KeyError, IndexError, OverflowError) as e:  # croniter's own slips
        raise InvalidScheduleError(f"cron {expr!r} is not valid: {e}", "cron") from e


def fires_after(expr: str, zone: str, after_ms: int) -> Iterator[int]:
    """The instants (epoch ms) at which ``expr`` fires in ``zone``, strictly after
    ``after_ms``, in order; endless unless the expression stops matching (croniter looks
    up to 50 years ahead for the next match). :class:`InvalidScheduleError` when this
    node cannot read the zone or the expression (the node that took the schedule could:
    another release of tzdata or croniter)."""
    tz = time_zone(zone)
    if not 0 <= after_ms < LAST_INSTANT_MS - 2 * 86_400_000:
        return  # datetime cannot name the wall times past year 9999
    try:
        it = _iterator(expr, _wall(after_ms // MS_PER_S, tz))
    except (CroniterError, ValueError, TypeError, KeyError, IndexError, OverflowError) as e:
        raise InvalidScheduleError(f"cron {expr!r} cannot be read here: {e}", "cron") from e
    last = after_ms
    while True:
        try:
            wall = it.get_next(dt.datetime)
            at = instant_ms(wall, tz)
        except (CroniterError, ValueError, OverflowError):  # no match left, or past year 9999
            return
        if at > last:
            last = at
            yield at


def instant_ms(wall: dt.datetime, tz: ZoneInfo) -> int:
    """The instant a naive wall time fires at in ``tz``: its first occurrence, or for a
    wall time the clocks skip, the first instant after the gap."""
    first = int(wall.replace(tzinfo=tz, fold=0).timestamp())
    if _wall(first, tz) == wall:
        return first * MS_PER_S
    # In a gap: fold=0 reads it with the offset before the change, fold=1 with the one
    # after; the change itself lies between the two readings.
    lo, hi = sorted((first, int(wall.replace(tzinfo=tz, fold=1).timestamp())))
    while lo < hi:  # the first second whose wall time is past ``wall``
        mid = (lo + hi) // 2
        if _wall(mid, tz) > wall:
            hi = mid
        else:
            lo = mid + 1
    return lo * MS_PER_S


def _wall(second: int, tz: ZoneInfo) -> dt.datetime:
    return dt.datetime.fromtimestamp(second, tz).replace(tzinfo=None)


def _iterator(expr: str, start: dt.datetime) -> croniter:
    six = expr.count(" ") == 5
    return croniter(expr, start, second_at_beginning=six)
