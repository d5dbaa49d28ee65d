"""The schedule checker fails on broken histories: a fire time skipped, one fired twice,
one received early, a key that names no fire time; and passes a sound one, redeliveries
of one message included."""

from __future__ import annotations

import pytest

from .history import History
from .schedule_checker import check_schedules, expected_fires, fire_key, schedule_violations

START = 1_767_225_600_000 + 500  # 2026-01-01 00:00:00.500 UTC: the first fire is 00:00:01
END = START + 10_000
SCHEDULES = [
    {"name": "tick", "cron": "* * * * * *", "timezone": "UTC", "start_at": START, "end_at": END},
    {"name": "kath", "cron": "*/2 * * * * *", "timezone": "Asia/Kathmandu", "start_at": START, "end_at": END},
]


def sound() -> History:
    """Each fire time of both schedules received once, a little after it."""
    h = History(seed=1)
    for s in SCHEDULES:
        h.add("schedules", **s)
        for k, at in enumerate(expected_fires(s["cron"], s["timezone"], START, END)):
            receive(h, s["name"], at, f"{s['name']}-{k:014d}")
    return h


def receive(h: History, name: str, at: int, mid: str, late: int = 5, key: str | None = None) -> None:
    h.add(
        "schedule_fires",
        id=mid,
        key=key or fire_key(name, at),
        receipt=f"r-{mid}-{len(h.schedule_fires)}",
        sent_ms=at,
        at_ms=at + late,
        deliver_at=at,
        delivered_at=at + late - 2,
        attempt=0,
    )


def verdict(h: History) -> tuple[dict, list[str]]:
    result = check_schedules(h.to_dict())
    return result, schedule_violations(result)


def test_the_expected_fire_times_are_each_second_and_each_even_second_of_the_window():
    assert expected_fires("* * * * * *", "UTC", START, END) == [START + 500 + k * 1000 for k in range(10)]
    # Kathmandu is UTC+05:45: its even wall seconds are the even UTC seconds
    assert expected_fires("*/2 * * * * *", "Asia/Kathmandu", START, END) == [
        START + 1500 + k * 2000 for k in range(5)
    ]
    assert expected_fires("*/2 * * * * *", "UTC", START + 1_500, START + 1_501) == [
        START + 1_500
    ]  # inclusive start


def test_a_sound_history_passes_and_a_redelivery_is_no_second_firing():
    h = sound()
    first = h.schedule_fires[0]
    receive(h, "tick", first["deliver_at"], first["id"], late=900)  # the same message, handed out again
    result, found = verdict(h)
    assert found == []
    assert (result["schedules"], result["schedule_fires_expected"], result["schedule_fires_received"]) == (
        2,
        15,
        15,
    )
    assert result["schedule_redeliveries"] == 1


def test_a_skipped_fire_time_fails():
    h = sound()
    gone = h.schedule_fires.pop(3)
    result, found = verdict(h)
    assert result["schedule_skipped"] == 1 and result["schedule_skipped_keys"] == [gone["key"]]
    assert found and found[0].startswith("schedule_skipped = 1")


def test_a_fire_time_fired_twice_fails():
    h = sound()
    at = expected_fires("*/2 * * * * *", "Asia/Kathmandu", START, END)[2]
    receive(h, "kath", at, "another-id-00001")  # a second message for that fire time
    result, found = verdict(h)
    assert result["schedule_fired_twice"] == 1 and result["schedule_fired_twice_keys"] == [
        fire_key("kath", at)
    ]
    assert found and found[0].startswith("schedule_fired_twice = 1")


@pytest.mark.parametrize("clock", ["at_ms", "delivered_at"])
def test_a_firing_received_before_its_time_fails(clock):
    h = sound()
    h.schedule_fires[4][clock] = h.schedule_fires[4]["deliver_at"] - 1
    result, found = verdict(h)
    assert result["schedule_early"] == 1 and result["schedule_early_keys"] == [h.schedule_fires[4]["key"]]
    assert found and found[0].startswith("schedule_early = 1")


def test_keys_and_times_that_name_no_fire_time_fail():
    h = sound()
    receive(h, "tick", END + 500, "past-the-end-0001")  # after the window
    receive(h, "tick", START + 1_500, "wrong-key-000001", key="schedule:tick:1")  # key not its time
    receive(h, "kath", START + 2_500, "odd-second-00001")  # a second the cron does not name
    result, found = verdict(h)
    assert result["schedule_unexpected"] == 3 and len(found) == 1
