"""Steps of a node's clocks (libfaketime's: wall and monotonic together) and an admin's
forced releases of the master (``--service``), drawn by the seed (sim/world.py)."""

from __future__ import annotations

from .conftest import replay


def test_a_forced_release_hands_the_master_over():
    """Seed 1 with node services releases the master 4 and 2 times in a row. Each release
    reads the target's ``/readyz`` through the simulator (sim/service.py); when the
    peers' HTTP addresses named no simulated node, every release (and every clock
    hand-over) ended ``no_linked_target`` after a second per peer, and none was made."""
    result = replay(1, "--service")
    assert result["ok"], result["detail"]
    assert [f.split()[-1] for f in result["faults"] if "release the master" in f] == ["x4", "x2"]
    assert result["answers"].get("release-master:ok", 0) >= 4, result["answers"]


def test_a_step_back_ends_the_process_and_the_cluster_rides_it_out():
    """Seed 5 (no services) steps n2's clocks back 200 ms: its Raft shell sees the
    monotonic clock go back at its next tick and ends the process (exit 71), which
    restarts when the fault ends; every invariant holds."""
    result = replay(5)
    assert result["ok"], result["detail"]
    assert any("step n2's clocks -200 ms" in f for f in result["faults"]), result["faults"]
    assert result["counts"]["monotonic exits"] == 1


def test_a_step_ahead_runs_on():
    """Seed 17 steps n3's clocks an hour ahead: nothing exits (a clock that jumps forward
    looks like a pause), and every invariant holds."""
    result = replay(17)
    assert result["ok"], result["detail"]
    assert any("step n3's clocks +3600000 ms" in f for f in result["faults"]), result["faults"]
    assert "monotonic exits" not in result["counts"]


def test_a_drift_lasts_in_the_lease_slack_after_it_ends():
    """Seed 5645 on 5 nodes with services, membership, power losses and writes kept out of
    order: n3's oscillator runs 5 % fast for 1.6 s, and 0.4 s after that ends n3's clocks
    step +500 ms. Samples and readings taken during the drift stay up to 5.5 s, so
    the checker's slack keeps the drift that long; counted only while it ran, the slack
    (505 ms) flagged a lease handed out 509 ms early."""
    result = replay(5645, "--nodes", "5", "--power-loss", "--service", "--membership", "--out-of-order")
    assert result["ok"], result["detail"]
    assert [f.split(" ", 2)[2] for f in result["faults"][:2]] == ["drift n3 +5%", "step n3's clocks +500 ms"]
    assert result["answers"]["slack ms"] > 509, result["answers"]
