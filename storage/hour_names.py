"""File names by UTC hour: ``YYYYMMDDHH`` <-> hours since the Unix epoch."""

from __future__ import annotations

import datetime as dt
import functools

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def hour_name(hour: int) -> str:
    return (_EPOCH + dt.timedelta(hours=hour)).strftime("%Y%m%d%H")


@functools.lru_cache(maxsize=1 << 16)  # names are re-read whenever the set of files changes
def parse_hour_name(name: str) -> int:
    """The hour of a name like ``2026112210``; ValueError for anything else."""
    if len(name) != 10 or not name.isdigit():
        raise ValueError(f"not an hour name: {name!r}")
    t = dt.datetime.strptime(name, "%Y%m%d%H").replace(tzinfo=dt.UTC)
    return int((t - _EPOCH).total_seconds()) // 3600
