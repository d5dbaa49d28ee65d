"""Fire times of recurring schedules: cron in a zone's wall time, across both DST changes,
with the clock an argument (cluster/schedule_times.py, cluster/schedule_plan.py)."""

from __future__ import annotations

import datetime as dt
from itertools import islice

import pytest

from horologe.cluster.errors import InvalidScheduleError
from horologe.cluster.schedule_plan import next_fires
from horologe.cluster.schedule_state import ScheduleDef, ScheduleMark
from horologe.cluster.schedule_times import check_cron, fires_after, time_zone

BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"


def at(zone: str, *wall: int, fold: int = 0) -> int:
    """Epoch ms of a local wall time (its first occurrence unless ``fold=1``)."""
    return int(dt.datetime(*wall, tzinfo=time_zone(zone), fold=fold).timestamp() * 1000)


def utc(*wall: int) -> int:
    return int(dt.datetime(*wall, tzinfo=dt.UTC).timestamp() * 1000)


def local(zone: str, ms: int) -> str:
    """A fire time as local wall time and offset, e.g. ``03:00+02:00``."""
    return dt.datetime.fromtimestamp(ms / 1000, time_zone(zone)).isoformat()


def fires(expr: str, zone: str, after_ms: int, n: int) -> list[str]:
    return [local(zone, f) for f in islice(fires_after(expr, zone, after_ms), n)]


# -- spring forward: 2026-03-29 02:00 CET -> 03:00 CEST in Berlin; 2026-03-08 in New York --


def test_a_daily_time_the_clocks_skip_fires_once_at_the_end_of_the_gap():
    got = fires("30 2 * * *", BERLIN, at(BERLIN, 2026, 3, 28, 12), 3)
    assert got == ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"]
    # the instant of the change itself: 01:00 UTC
    assert next(fires_after("30 2 * * *", BERLIN, at(BERLIN, 2026, 3, 28, 12))) == utc(2026, 3, 29, 1)


def test_an_hourly_schedule_fires_once_for_the_skipped_hour():
    got = fires("0 * * * *", BERLIN, at(BERLIN, 2026, 3, 29, 0, 30), 4)
    assert got == [
        "2026-03-29T01:00:00+01:00",
        "2026-03-29T03:00:00+02:00",  # 02:00 does not exist, and 03:00 is the same instant: once
        "2026-03-29T04:00:00+02:00",
        "2026-03-29T05:00:00+02:00",
    ]


def test_every_quarter_hour_across_spring_forward_in_new_york():
    got = fires("*/15 * * * *", NEW_YORK, at(NEW_YORK, 2026, 3, 8, 1, 40), 4)
    assert got == [
        "2026-03-08T01:45:00-05:00",
        "2026-03-08T03:00:00-04:00",  # 02:00, 02:15, 02:30, 02:45 all fall in the gap: one firing
        "2026-03-08T03:15:00-04:00",
        "2026-03-08T03:30:00-04:00",
    ]


# -- fall back: 2026-10-25 03:00 CEST -> 02:00 CET in Berlin; 2026-11-01 in New York --------


def test_a_daily_time_that_repeats_fires_once_at_its_first_occurrence():
    got = fires("30 2 * * *", BERLIN, at(BERLIN, 2026, 10, 24, 12), 3)
    assert got == ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00", "2026-10-27T02:30:00+01:00"]


def test_every_quarter_hour_across_fall_back_fires_the_repeated_hour_once():
    got = fires("*/15 * * * *", BERLIN, at(BERLIN, 2026, 10, 25, 1, 40), 7)
    assert got == [
        "2026-10-25T01:45:00+02:00",
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:15:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:45:00+02:00",
        # the second pass through 02:00-02:59 (CET) fires nothing
        "2026-10-25T03:00:00+01:00",
        "2026-10-25T03:15:00+01:00",
    ]


def test_an_hourly_schedule_in_new_york_fires_the_repeated_one_oclock_once():
    got = fires("0 * * * *", NEW_YORK, at(NEW_YORK, 2026, 11, 1, 0, 30), 3)
    assert got == ["2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00", "2026-11-01T03:00:00-05:00"]


def test_starting_inside_the_second_pass_of_a_repeated_hour_fires_nothing_until_it_ends():
    second_pass = at(BERLIN, 2026, 10, 25, 2, 10, fold=1)  # 02:10 CET, after 02:10 CEST
    assert fires("*/15 * * * *", BERLIN, second_pass, 2) == [
        "2026-10-25T03:00:00+01:00",
        "2026-10-25T03:15:00+01:00",
    ]


# -- the rest ---------------------------------------------------------------------------


def test_fire_times_are_strictly_after_the_given_instant():
    t = utc(2026, 1, 1, 12)
    assert next(fires_after("0 12 * * *", "UTC", t)) == utc(2026, 1, 2, 12)
    assert next(fires_after("0 12 * * *", "UTC", t - 1)) == t


def test_six_fields_put_seconds_first():
    t = utc(2026, 1, 1)
    assert list(islice(fires_after("*/20 * * * * *", "UTC", t), 3)) == [t + 20_000, t + 40_000, t + 60_000]
    assert next(fires_after("30 0 12 * * *", "UTC", t)) == utc(2026, 1, 1, 12, 0, 30)


@pytest.mark.parametrize(
    ("expr", "code"),
    [
        ("* * * *", "invalid_field"),  # 4 fields
        ("0 0 * * * 2027", "invalid_field"),  # croniter's year field: refused
        ("61 * * * *", "invalid_field"),
        ("*/0 * * * *", "invalid_field"),
        ("H * * * *", "invalid_field"),  # hashed
        ("R * * * *", "invalid_field"),  # random: another time on each call
        ("nonsense", "invalid_field"),
        ("0 0 31 2 *", "out_of_range"),  # February 31st: never
    ],
)
def test_cron_expressions_refused(expr, code):
    with pytest.raises(InvalidScheduleError) as e:
        check_cron(expr)
    assert (e.value.field, e.value.code) == ("cron", code)


def test_month_and_day_names_are_not_mistaken_for_hashed_fields():
    check_cron("0 9 * MAR THU")


@pytest.mark.parametrize(
    "name", ["Mars/Olympus", "localtime", "../etc/passwd", "", "europe/berlin", "Factory"]
)
def test_unknown_zones_are_refused(name):
    with pytest.raises(InvalidScheduleError) as e:
        time_zone(name)
    assert e.value.field == "timezone"


def test_zones_come_from_the_tzdata_package():
    assert time_zone("UTC").utcoffset(dt.datetime(2026, 1, 1)) == dt.timedelta(0)
    assert time_zone("Asia/Kolkata").utcoffset(dt.datetime(2026, 1, 1)) == dt.timedelta(hours=5, minutes=30)


def schedule(**kw) -> ScheduleDef:
    return ScheduleDef("s", "t", b"x", kw.pop("cron", "0 * * * *"), kw.pop("timezone", "UTC"), **kw)


def test_next_five_fires_respect_start_and_end():
    t = utc(2026, 1, 1)
    d = schedule(start_at=utc(2026, 1, 1, 3), end_at=utc(2026, 1, 1, 6))
    m = ScheduleMark(1, d.start_at - 1)  # as a create sets it
    assert next_fires(d, m, t) == [utc(2026, 1, 1, h) for h in (3, 4, 5)]  # 06:00 is the end: not included
    assert next_fires(d, m, utc(2026, 1, 1, 6)) == []


def test_next_fires_list_the_planned_ones_then_those_after_the_mark():
    t = utc(2026, 1, 1)
    d = schedule(cron="* * * * *")
    planned = tuple(t + k * 60_000 for k in range(1, 4))
    m = ScheduleMark(1, t + 3 * 60_000 + 30_000, planned)
    assert next_fires(d, m, t + 90_000) == [t + k * 60_000 for k in (2, 3, 4, 5, 6)]
    # after a resume the mark is ahead with nothing planned: the cancelled ones do not come back
    assert next_fires(d, ScheduleMark(1, t + 150_000), t) == [t + k * 60_000 for k in (3, 4, 5, 6, 7)]
    assert next_fires(schedule(paused=True), m, t) == []


def test_next_fires_are_after_the_clock_that_answers_not_after_the_create():
    """A create stamped 10 ms before a second and answered 5 ms after it: that second is
    past when the answer is made (it still fires: the mark is before it), so the next five
    begin a second later (tests/integration/test_schedules.py expects either)."""
    created = utc(2026, 1, 1) - 10
    d = schedule(cron="* * * * * *")
    m = ScheduleMark(1, created)  # as a create sets it
    assert next_fires(d, m, created)[0] == utc(2026, 1, 1)
    assert next_fires(d, m, created + 15)[:2] == [utc(2026, 1, 1) + 1000, utc(2026, 1, 1) + 2000]
