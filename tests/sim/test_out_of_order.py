"""A power loss that keeps what was not synced sector by sector, in no order
(sim/disk.py, ``--out-of-order``): a later sector of a journal on disk, an earlier one
zeros."""

from __future__ import annotations

import os
import random

from horologe.storage.commit_journal import CommitJournal
from horologe.storage.framing import SECTOR
from sim.disk import SECTORS, TEAR

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


class _Draws(random.Random):
    """A power loss's draws, scripted: ``choice`` and ``randrange`` answer from their
    lists in turn, ``random`` from its list and then ``then``."""

    def __init__(self, choices=(), ranges=(), randoms=(), then=0.9):
        super().__init__(0)
        self._choices, self._ranges, self._randoms = list(choices), list(ranges), list(randoms)
        self._then = then

    def choice(self, seq):
        return self._choices.pop(0)

    def randrange(self, start, stop=None, step=1):
        return self._ranges.pop(0)

    def random(self):
        return self._randoms.pop(0) if self._randoms else self._then


def _record(ri: int) -> dict:
    """A commit record whose frame spans about three sectors."""
    return {"ri": ri, "files": {f"h{ri}.data": ri * 1_000}, "meta": {"pad": "x" * 1_500}}


def _replay_unsynced(journal: CommitJournal) -> list[int]:
    """Append records 2..5 unsynced, as the Raft log's replay does after record 1's sync
    point; where each frame starts."""
    starts = []
    for ri in range(2, 6):
        starts.append(journal._file.length)
        journal.append(_record(ri), synced=False)
    journal.close()
    return starts


def test_the_cut_at_open_is_durable_so_a_torn_tail_never_comes_back_under_a_replay(disk):
    """Forced on the simulated disk with the real journal: a power loss tears commits.log
    inside an unsynced frame; open cuts back to the sync point; the Raft log's replay
    writes the same frames again, past the torn end; a second power loss keeps every
    sector past the durable end but its first. Had the cut not reached the disk, the torn
    bytes are what it holds up to the torn end, and the frame across that end comes back
    whole but for zeros from there to the next sector: no lost write leaves that, and open
    refused the store (CorruptLogError). The simulator met it at seed 7069 with
    ``--service --membership --spares-first --out-of-order``; that seed left the window
    as other fixes moved its timing (the canary ``no-cut-fsync``, tests/sim/
    test_canaries.py)."""
    disk, node = disk
    journal = CommitJournal(node, compact_bytes=1 << 30)
    journal.open()
    journal.append(_record(1), synced=True)
    sync_point = journal._file.length
    starts = _replay_unsynced(journal)
    torn_at = starts[1] + 600  # inside the second unsynced frame, its tail two sectors on
    torn_at += torn_at % SECTOR == 0
    assert disk.lose_power(node, _Draws(choices=[TEAR], ranges=[torn_at - sync_point]))

    journal = CommitJournal(node, compact_bytes=1 << 30)
    journal.open()
    assert journal.state.applied_index == 1 and os.path.getsize(journal.path) == sync_point
    assert _replay_unsynced(journal) == starts  # the same bytes at the same places
    assert disk.lose_power(node, _Draws(choices=[SECTORS], randoms=[0.0]), out_of_order=True)

    journal = CommitJournal(node, compact_bytes=1 << 30)
    journal.open()  # CorruptLogError, the cut not durable
    assert journal.state.applied_index == 1
    assert journal.lost_at is not None  # writes lost out of order, past the sync point
    journal.close()
