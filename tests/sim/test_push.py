"""``--push``: the master's push worker sends a subscription's messages to a simulated
receiver that answers 200, 503, 500, nothing or too late (sim/push.py). Its leases are
checked as pulls' are, every push taken against its time, and once the run recovered
every message owed must be taken with a 2xx or nacked at its last retry level, and each
of those in the group's dead-letter queue."""

from __future__ import annotations

from .conftest import replay

ANSWERS = ("200", "503", "500", "hang", "late")


def test_every_owed_message_is_pushed_or_dead_lettered_through_failovers():
    """Seed 30: links cut one way, a crash, a stop, clocks stepped back, a release of the
    master; the receiver answers each way, and messages fail at every retry level, into
    ``%DLQ%pg``."""
    pushed = replay(30, "--service", "--push")
    assert pushed["ok"], pushed["detail"]
    counts = pushed["counts"]
    assert all(counts[f"pushes answered {a}"] > 0 for a in ANSWERS), counts
    assert counts["push dead letters"] >= 1 and counts["push subscription puts answered"] >= 2, counts
