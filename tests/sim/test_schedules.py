"""``--schedules``: the workload creates a recurring schedule that fires every second,
then pauses and resumes it; the nodes plan its firings 1 s ahead, and the consumers pull
them (sim/workload.py, "Scheduler"). Its checks can fail: ``fake-skip-passed`` and
``fake-pause`` in test_canaries.py."""

from __future__ import annotations

from .conftest import replay

IN_READY_LOGS = "schedule firings in the ready logs"


def test_each_fire_time_planned_is_in_every_ready_log_once_through_the_releases_of_the_master():
    """Seed 1 releases the master six times, and the schedule is paused and resumed;
    the consumers were handed firings, and the end check found each fire time planned,
    due and not skipped by a pause in each node's ready log once."""
    fired = replay(1, "--service", "--schedules")
    assert fired["ok"], fired["detail"]
    assert len(fired["faults"]) == 2 and all("release the master" in f for f in fired["faults"])
    counts = fired["counts"]
    assert counts["schedule create answered"] == 1, counts
    assert counts["schedule pause answered"] >= 1 and counts["schedule resume answered"] >= 1, counts
    assert counts["firings handed out"] > 0, counts
    assert counts[IN_READY_LOGS] > 0, counts
    plain = replay(1, "--service")
    assert IN_READY_LOGS not in plain["counts"] and "schedule:ok" not in plain["answers"]
