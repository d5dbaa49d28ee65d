"""``--retention``: retention cuts within a run (``retention_ms`` 300, looked at every
100 ms, a ready segment closed every 500 ms of deliveries; the world's clock starts 4 s
before an hour). At the end, a message owed that is no longer in a ready log must have
been handed out, or delivered before its group had progress on the topic (retention
trims a topic with no group whoever will read it), or, with a lateness policy, be in
an hour retention removed (sim/world.py, ``check_end``)."""

from __future__ import annotations

from .conftest import replay

TRIMMED, HOURS = "ready entries trimmed", "hours removed"
WAITED = "shipments that waited for a newer dump"


def test_ready_logs_are_trimmed_and_the_first_hour_removed_with_nothing_owed_lost():
    """Seed 35: ready entries trimmed on every node alike, the hour before the world's
    first full hour removed, and every message owed still in a ready log or handed out."""
    cut = replay(35, "--service", "--retention")
    assert cut["ok"], cut["detail"]
    assert cut["counts"][TRIMMED] > 0 and cut["counts"][HOURS] == 1, cut["counts"]


def test_a_shipment_missing_a_file_retention_removed_waits_for_a_newer_dump():
    """Seed 3: retention removes a ready segment named by the dump the master is
    shipping to a follower; the shipment waits for a newer dump. Before 914a6e8
    pysyncobj's send loop began the same dump again at once, for as long as a heartbeat,
    which under the simulator's clock (still within a tick) is for ever: the seed hung."""
    waited = replay(3, "--service", "--retention")
    assert waited["ok"], waited["detail"]
    assert waited["counts"][WAITED] >= 1, waited["counts"]
