"""A node restarted from its own dump keeps every entry its journal held; a node whose
monotonic clock went back ends, to be restarted.

pysyncobj compacts in two ticks: the dump is renamed into place on one, the journal cut on
the next. At start it keeps the journal only if its first two entries are the dump's last
two, and clears it otherwise; a crash between the two ticks left a journal that still
began at the previous compaction, and the restart dropped every entry after the dump,
entries it had fsynced, acknowledged and (as a leader) committed among them.
"""

from __future__ import annotations

import pytest

from horologe.cluster.raft import dump_file
from horologe.cluster.raft import node as raft_node
from horologe.cluster.raft.monotonic_watch import MonotonicWatch

from .ticked import commit_alone, crash, journal_entries, lead_alone, propose, tick, ticked_node


class Crash(Exception):
    pass


def test_a_crash_between_the_dump_and_the_journal_cut_keeps_the_entries_after_the_dump(tmp_path, monkeypatch):
    node = ticked_node(tmp_path, log_compaction_min_entries=4)
    lead_alone(node)
    commit_alone(node, 1_000, 3)
    # The next tick appends these, then takes a dump at what is applied (the log is long
    # enough); the tick after commits and applies them, then would cut the journal.
    answers = [propose(node, 2_000 + i) for i in range(3)]
    tick(node)
    dumped = node._dump.last
    assert dumped is not None and node._dump.finished
    real_fsync_dir = dump_file.fsync_dir

    def die(folder):  # the cut's first step, after the dump's rename
        raise Crash()

    monkeypatch.setattr(dump_file, "fsync_dir", die)
    with pytest.raises(Crash):
        tick(node)
    assert all(answers), "the entries after the dump were committed before the crash"
    held = journal_entries(node)
    assert held[-1][1] > dumped.index
    crash(node)
    monkeypatch.setattr(dump_file, "fsync_dir", real_fsync_dir)

    again = ticked_node(tmp_path, log_compaction_min_entries=4)
    try:
        tick(again)  # loads the dump
        after = {e[1]: e for e in journal_entries(again)}
        since_dump = [e for e in held if e[1] >= dumped.index - 1]
        assert [after.get(e[1]) for e in since_dump] == since_dump
        assert again.raftLastApplied >= dumped.index
        lead_alone(again)
        assert again.raftLastApplied > held[-1][1]  # its new term's first entry applied too
        assert again.state.store.applied_index == held[-1][1]
    finally:
        crash(again)


def test_a_monotonic_clock_that_went_back_ends_the_process(tmp_path, monkeypatch):
    """Every deadline of the node would lie as far ahead as the clock went back (a master
    under load kept its lead and delivered nothing for 70 s): the process ends instead."""
    steps: list[float] = []
    node = ticked_node(tmp_path, on_monotonic_step=steps.append)
    try:
        lead_alone(node)
        assert steps == []
        now = raft_node.monotonic_time()
        monkeypatch.setattr(raft_node, "monotonic_time", lambda: now - 3600)
        tick(node)
        assert len(steps) == 1 and 3599 < steps[0] < 3601
    finally:
        crash(node)


def test_the_watch_takes_forward_jumps_and_repeats_for_what_it_saw():
    watch = MonotonicWatch(100.0)
    assert watch.went_back(100.0) is None and watch.went_back(3700.0) is None  # a pause
    assert watch.went_back(3699.0) == 1.0
    assert watch.went_back(3700.5) is None


def test_a_dump_whose_last_entry_is_a_new_leaders_no_op_restarts(tmp_path):
    """A new leader's first entry is pysyncobj's own no-op, which never reaches the store:
    a dump taken right after it names a Raft index one past the store's. The store is not
    behind that dump (found by the simulator, seeds 32 and 72)."""
    node = ticked_node(tmp_path)
    lead_alone(node)
    commit_alone(node, 1_000, 2)
    crash(node)
    again = ticked_node(tmp_path, log_compaction_min_entries=2)
    lead_alone(again)  # a new term: its no-op is the last entry applied
    for _ in range(5):
        if again._dump.last is not None:
            break
        tick(again)
    dumped = again._dump.last
    assert dumped is not None and dumped.index > again.state.store.applied_index
    crash(again)
    third = ticked_node(tmp_path, log_compaction_min_entries=2)
    try:
        tick(third)  # loads the dump
        assert third.state.halted is None
    finally:
        crash(third)
