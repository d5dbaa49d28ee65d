"""The verdict on recurring schedules in a chaos run, from what their consumer received.

Each schedule of the history (``schedules``: name, cron, timezone, ``start_at``,
``end_at``) names a window ``[start_at, end_at)``; its fire times there are computed
here afresh (:func:`expected_fires`: croniter's ``match`` on each second's wall time in
the zone, not the iteration cluster/schedule_times.py uses), so a fault in the node's
own planning cannot hide itself. Against every hand-out the schedule consumer recorded
(``schedule_fires``), checked per fire time:

* **skipped**: a fire time of the window never received;
* **fired twice**: one fire time received as two messages (two ids). The same id handed
  out again is a redelivery (a lease lost with its master), not a second firing;
* **early**: received before its fire time, by the true clock (``at_ms``) or by the
  clock of the master that delivered it (``delivered_at``);
* **unexpected**: a message whose key is not ``schedule:<name>:<fire ms>`` of a schedule
  of the run, whose ``deliver_at`` is not that fire ms, or whose fire ms is not a fire
  time of the window (outside it, or a time the cron does not name).

The windows must hold no change of UTC offset (a DST transition): a wall time the clocks
repeat or skip fires by rules (docs/api.md) that a per-second match does not follow.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from zoneinfo import ZoneInfo

from croniter import croniter

KEY_PREFIX = "schedule:"
SHOWN = 20  # keys listed per finding


def fire_key(name: str, fire_ms: int) -> str:
    return f"{KEY_PREFIX}{name}:{fire_ms}"


def expected_fires(cron: str, zone: str, start_ms: int, end_ms: int) -> list[int]:
    """Every fire time (epoch ms) in ``[start_ms, end_ms)``: each whole second whose wall
    time in ``zone`` the cron (6 fields: seconds first) matches."""
    tz = ZoneInfo(zone)
    six = cron.count(" ") == 5
    out = []
    for second in range(-(-start_ms // 1000), -(-end_ms // 1000)):
        wall = dt.datetime.fromtimestamp(second, tz).replace(tzinfo=None)
        if croniter.match(cron, wall, second_at_beginning=six):
            out.append(second * 1000)
    return out


def check_schedules(history: dict) -> dict:
    """The findings above over every schedule of the history, and what was expected."""
    expected: dict[str, int] = {}  # key -> fire ms
    for s in history.get("schedules", []):
        for at in expected_fires(s["cron"], s["timezone"], s["start_at"], s["end_at"]):
            expected[fire_key(s["name"], at)] = at
    ids: dict[str, set[str]] = {}
    early, unexpected = set(), set()
    handouts = Counter()  # (key, id) -> times handed out
    for f in history.get("schedule_fires", []):
        key = f.get("key") or f"(no key: {f['id']})"
        at = expected.get(key)
        if at is None or f["deliver_at"] != at:
            unexpected.add(key)
            continue
        handouts[key, f["id"]] += 1
        ids.setdefault(key, set()).add(f["id"])
        if f["at_ms"] < at or f["delivered_at"] < at:
            early.add(key)
    skipped = sorted(set(expected) - set(ids), key=expected.get)
    twice = sorted((k for k, got in ids.items() if len(got) > 1), key=expected.get)
    return {
        "schedules": len(history.get("schedules", [])),
        "schedule_fires_expected": len(expected),
        "schedule_fires_received": len(ids),
        "schedule_redeliveries": sum(n - 1 for n in handouts.values()),
        "schedule_skipped": len(skipped),
        "schedule_skipped_keys": skipped[:SHOWN],
        "schedule_fired_twice": len(twice),
        "schedule_fired_twice_keys": twice[:SHOWN],
        "schedule_early": len(early),
        "schedule_early_keys": sorted(early, key=expected.get)[:SHOWN],
        "schedule_unexpected": len(unexpected),
        "schedule_unexpected_keys": sorted(unexpected)[:SHOWN],
    }


def schedule_violations(result: dict) -> list[str]:
    """What in :func:`check_schedules`' result makes a run fail (nothing for a run without schedules)."""
    out = []
    for key in ("schedule_skipped", "schedule_fired_twice", "schedule_early", "schedule_unexpected"):
        if result.get(key):
            out.append(f"{key} = {result[key]} (e.g. {', '.join(result[key + '_keys'][:3])})")
    return out
