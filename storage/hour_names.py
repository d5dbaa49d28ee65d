"""File names by UTC hour: ``YYYYMMDDHH`` <-> hours since the Unix epoch."""

from __future__ import annotations

import datetime as dt
import functools

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# The last hour a file name can hold (datetime ends with year 9999): a message id naming a
# later one names nothing, and must be refused before it reaches an apply (message_id.py).
MAX_HOUR = (dt.datetime(9999, 12, 31, 23, tzinfo=dt.UTC) - _EPOCH) // dt.timedelta(hours=1)


def hour_name(hour: int) -> str:
    return (_EPOCH + dt.timedelta(hours=hour)).strftime("%Y%m%d%H")


@functools.lru_cache(maxsize=1 << 16)  # names are re-read whenever the set of files changes
def parse_hour_name(name: str) -> int:
    """The hour of a name like ``2026112210``; ValueError for anything else."""
    if len(name) != 10 or not name.isdigit():
        raise ValueError(f"not an hour name: {name!r}")
    # datetime refuses a month, day or hour out of range; no strptime, whose module
    # loads on its first call (in a node's first apply, 1-2 ms)
    t = dt.datetime(int(name[:4]), int(name[4:6]), int(name[6:8]), int(name[8:]), tzinfo=dt.UTC)
    return int((t - _EPOCH).total_seconds()) // 3600
