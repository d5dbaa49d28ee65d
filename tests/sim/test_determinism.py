"""A seed replays bit for bit: the same seed, run in two fresh processes, gives the same
trace (every step's actor, time and every node's role, term, commit, applied and last
index, hashed)."""

from __future__ import annotations

import pytest

from .conftest import replay


def test_one_seed_twice_gives_the_same_trace_hash():
    first, second = replay(5), replay(5)
    assert first["steps"] > 1000
    assert first["trace_hash"] == second["trace_hash"]
    assert (first["ok"], first["steps"], first["acked"]) == (second["ok"], second["steps"], second["acked"])


def test_another_seed_gives_another_trace():
    assert replay(6)["trace_hash"] != replay(5)["trace_hash"]


def test_five_nodes_replay_too():
    first, second = replay(3, "--nodes", "5"), replay(3, "--nodes", "5")
    assert first["ok"], first["detail"]
    assert first["trace_hash"] == second["trace_hash"]


def test_a_scripted_scenario_replays_too():
    first, second = replay(2, "--scenario", "late-answer"), replay(2, "--scenario", "late-answer")
    assert first["ok"], first["detail"]
    assert first["trace_hash"] == second["trace_hash"]


def test_a_power_loss_replays_too():
    """Seed 7 loses power on every node at 1.557 s: files put back as the fsyncs left them,
    tails dropped, torn or zeroed by the seed (sim/disk.py)."""
    first, second = replay(7, "--power-loss"), replay(7, "--power-loss")
    assert first["ok"], first["detail"]
    assert any("power loss" in fault for fault in first["faults"])
    assert first["trace_hash"] == second["trace_hash"]


def test_a_torn_journal_replays_too():
    """Without journal syncs, the power loss tears journals: the warning a restart logs
    names the run's folder, which holds the process id, and must not reach the trace."""
    args = ("--scenario", "power-after-ack", "--canary", "no-journal-sync")
    first, second = replay(1, *args), replay(1, *args)
    assert not first["ok"]
    assert first["trace_hash"] == second["trace_hash"]


def test_stops_drifts_and_a_failed_fsync_replay_too():
    """Seed 6 with power losses: a failed fsync ends n3's process mid-step, n2's clock
    runs 5 % slow, then n2 is stopped (its steps wait, in order, for its SIGCONT)."""
    first, second = replay(6, "--power-loss"), replay(6, "--power-loss")
    assert first["ok"], first["detail"]
    kinds = " ".join(first["faults"])
    assert "fsync 17 of n3 fails" in kinds and "drift n2" in kinds and "stop n2" in kinds
    assert first["trace_hash"] == second["trace_hash"]


@pytest.mark.parametrize("seed", (125, 723))
def test_a_stop_within_a_stop_ends_with_the_later(seed):
    """With power losses, seeds 125 and 723 stop n2 twice over: in 125 the second stop ends
    first, in 723 it ends last and starts once steps were held for the first. Either way
    the node's steps wait for the later end and then run in the order they came (a link
    delivered out of order when each was put off to the end known at its time)."""
    result = replay(seed, "--power-loss")
    assert result["ok"], result["detail"]
    assert [f.split()[-2:] for f in result["faults"] if " stop " in f] == [["stop", "n2"], ["stop", "n2"]]


def test_node_services_replay_too():
    """Seed 3 with every node a NodeService (``--service``): asyncio loops on virtual
    time, group commits, leases, consumers; a crash and a stop of n1, a one-way drop, a
    reset and a slow link."""
    first, second = (replay(3, "--service") for _ in range(2))
    assert first["ok"], first["detail"]
    assert first["answers"]["handed out"] > 100
    assert first["trace_hash"] == second["trace_hash"]
