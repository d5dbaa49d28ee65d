"""The rules the Raft shell adds to pysyncobj's membership changes (cluster/raft/membership.py),
on nodes ticked by hand: one change at a time, no say for a node outside the membership, no
election from a node started to join, and the membership of the log's tail taken at start."""

from __future__ import annotations

import time

from pysyncobj import FAIL_REASON

from horologe.cluster.raft.dial_node import DialNode
from horologe.cluster.raft.membership import Member

from .ticked import commit_alone, crash, lead_alone, tick, ticked_node


def _node(address: str, node_id: str) -> DialNode:
    return DialNode(address, None, node_id, "127.0.0.1:9")


def test_a_second_change_waits_until_the_first_is_committed(tmp_path):
    """pysyncobj means to refuse it but never records the index it checks against: both
    changes would be in the log uncommitted, and two changes in flight can make two
    majorities that do not meet."""
    node = ticked_node(tmp_path)
    try:
        lead_alone(node)
        answers: list = []
        # Alone, the first change makes a cluster of two: it cannot commit without the new node.
        node.addNodeToCluster(_node("127.0.0.1:1", "x"), callback=lambda _r, e: answers.append(("x", e)))
        node.addNodeToCluster(_node("127.0.0.1:2", "y"), callback=lambda _r, e: answers.append(("y", e)))
        tick(node)
        assert answers == [("y", FAIL_REASON.REQUEST_DENIED)]
        assert {n.address for n in node.otherNodes} == {"127.0.0.1:1"}
    finally:
        crash(node)


def test_a_candidate_outside_the_membership_is_not_heard(tmp_path):
    node = ticked_node(tmp_path, peers=("127.0.0.1:7",))
    try:
        stranger = _node("127.0.0.1:8", "s")
        vote = {"type": "request_vote", "term": 9, "last_log_index": 100, "last_log_term": 9}
        node._on_message(stranger, vote)
        assert node.raftCurrentTerm == 0  # its term not taken: a removed node deposes no one
        member = next(iter(node.otherNodes))
        node._on_message(member, vote)
        assert node.raftCurrentTerm == 9
    finally:
        crash(node)


def test_a_node_started_to_join_stands_for_no_election(tmp_path):
    node = ticked_node(tmp_path, join=True)
    try:
        deadline = time.monotonic() + 3 * node.settings.raft_max_timeout
        while time.monotonic() < deadline:
            tick(node)
            time.sleep(0.01)
        assert not node.is_master() and node.raftCurrentTerm == 0
        (me,) = node._members()
        assert me == Member("n0", node.settings.raft, "", voter=False)
    finally:
        crash(node)


def test_a_restart_takes_the_changes_in_its_logs_tail_at_once(tmp_path):
    """pysyncobj takes a change at start only once it applies it (committed); Raft has a
    node use the latest membership in its log."""
    node = ticked_node(tmp_path)
    lead_alone(node)
    node.addNodeToCluster(_node("127.0.0.1:1", "x"), callback=lambda _r, _e: None)
    tick(node)
    assert node.raftCommitIndex < node.last_log_index()  # the change is in the log, uncommitted
    crash(node)
    again = ticked_node(tmp_path)
    try:
        assert {(m.node_id, m.voter) for m in again._members()} == {("n0", True), ("x", True)}
    finally:
        crash(again)


def test_a_restart_from_a_dump_takes_the_changes_after_it(tmp_path):
    """pysyncobj loads the dump at the first tick and makes its members the node's; the
    changes in the log after it must be taken over them (the first tick's load came after
    anything the constructor took)."""
    node = ticked_node(tmp_path, log_compaction_min_entries=4)
    lead_alone(node)
    commit_alone(node, 1_000, 6)
    node.forceLogCompaction()
    for _ in range(5):
        tick(node)
    assert node._dump.last is not None, "a dump was written"
    node.addNodeToCluster(_node("127.0.0.1:1", "x"), callback=lambda _r, _e: None)
    tick(node)
    assert node.raftCommitIndex < node.last_log_index()  # the change is after the dump, uncommitted
    crash(node)
    again = ticked_node(tmp_path, log_compaction_min_entries=4)
    try:
        tick(again)  # loads the dump
        assert {(m.node_id, m.voter) for m in again._members()} == {("n0", True), ("x", True)}
    finally:
        crash(again)
