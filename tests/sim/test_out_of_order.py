"""A power loss that keeps what was not synced sector by sector, in no order
(sim/disk.py, ``--out-of-order``): a later sector of a journal on disk, an earlier one
zeros."""

from __future__ import annotations

from .conftest import replay


def test_unsynced_commits_kept_out_of_order_go_back_to_the_last_sync_point():
    """Seed 6: a failed fsync ends n3, whose power then goes, and later every node loses
    power. A node's commits.log comes back with a bad frame before whole ones, all past
    its last sync point. Open took that for damage and the node refused to start
    (CorruptLogError; 38 of seeds 1..200 failed so); it now goes back to the last sync
    point (storage/commit_journal.py) and the Raft log replays the rest."""
    first, second = (replay(6, "--power-loss", "--out-of-order") for _ in range(2))
    assert first["ok"], first["detail"]
    assert first["counts"].get("writes lost out of order", 0) >= 1, first["counts"]
    assert first["trace_hash"] == second["trace_hash"]


def test_raft_entries_kept_out_of_order_are_a_torn_tail():
    """Seed 1303 with --service --membership: a power loss keeps a later sector of a
    node's Raft journal and not an earlier one, past its last sync. The journal refused to
    open (CorruptLogError: a bad frame with data after it); it now cuts there as at a torn
    tail (cluster/raft/journal.py), none of what follows having been synced."""
    result = replay(1303, "--power-loss", "--service", "--membership", "--out-of-order")
    assert result["ok"], result["detail"]


def test_a_cut_of_the_commit_journal_is_durable_before_anything_is_written_in_its_place():
    """Seed 7069 with --service --membership --spares-first: a power loss tears n3's
    commits.log inside a frame, and open cuts it back to the last sync point. The Raft
    log replays the same batches, so the same bytes are written again up to the old end,
    and a second power loss keeps some sectors of them: the frame across the old end came
    back whole up to it and zeros past it, which no lost write leaves, and n3 refused to
    start (CorruptLogError). The cut is now fsynced at once, as the Raft journal's is. The
    seed was found with a master's idle S entries every 50 ms (sync_interval_ms's default
    then); at 250 it no longer reaches the window."""
    result = replay(
        7069,
        "--power-loss",
        "--service",
        "--membership",
        "--spares-first",
        "--out-of-order",
        "--sync-interval-ms",
        "50",
    )
    assert result["ok"], result["detail"]
    assert result["counts"].get("writes lost out of order", 0) >= 1, result["counts"]
