"""``--lateness``: a third of the producer's messages carry a lateness policy (drop or
dead-letter past 0, 30, 300 or 1,500 ms); at the end each owed one is in every ready log
within its allowance, or dropped or dead-lettered past it, alike on every node
(sim/world.py, ``check_end``). Its checks can fail: ``fake-late-deliver`` and
``fake-late-lose`` in test_canaries.py."""

from __future__ import annotations

from .conftest import replay

DROPPED, DEAD = "late messages dropped", "late messages dead-lettered"
IN_DLQ = "late messages in the dead-letter queue"


def test_messages_past_their_allowance_are_dropped_or_dead_lettered_alike_on_every_node():
    """Seed 1 (a clock step, a crash, six releases of the master): some messages fell due
    past their allowance and were dropped, others dead-lettered, most of those into the
    group's dead-letter queue (the rest before the group had acknowledged a message of
    their topic, so no queue took them), and the end check passed."""
    late = replay(1, "--service", "--lateness")
    assert late["ok"], late["detail"]
    counts = late["counts"]
    assert counts[DROPPED] > 0 and counts[DEAD] > 0, counts
    assert 0 < counts[IN_DLQ] <= counts[DEAD], counts
