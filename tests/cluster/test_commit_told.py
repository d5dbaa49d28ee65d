"""A leader's new commit index rides on its next append (``commit_told_within_s``).

pysyncobj's leader, with ``appendEntriesUseBatch`` off, sends every follower an append of
its own after each apply, only to tell the new commit index: two more appends, follower
wake-ups and answers per sequential produce. The shell's leader sends it with the next
append instead: a proposal's, sent at once, or one due a tick after the apply.
"""

from __future__ import annotations

import time

from pysyncobj import FAIL_REASON

from .ticked import ack, lead_with_peers, peer, propose, tick, ticked_node

PEERS = ("127.0.0.1:1", "127.0.0.1:2")


def _appends(node) -> list[tuple[object, dict]]:
    return [(p, m) for p, m in node.sent if m.get("type") == "append_entries"]


def _commit_one(node, ms: int) -> int:
    """Propose an entry, have the first peer hold it, tick until it is applied; its index.
    ``node.sent`` then holds what the leader sent from the commit on."""
    answers = propose(node, ms)
    tick(node)  # appended and sent
    index = node.last_log_index()
    node.sent.clear()
    ack(node, peer(node, 0), index)  # a majority holds it: committed
    for _ in range(5):
        if answers:
            break
        tick(node)
    assert answers == [(answers[0][0], FAIL_REASON.SUCCESS)], answers
    return index


# No heartbeat, election or fallback comes due in a test on a slow machine (pysyncobj
# wants the timeouts above 3 heartbeats and at most its 3.5 s connection timeout): an
# append that goes out is the one the commit index asked for.
QUIET = {
    "heartbeat_s": 1.0,
    "raft_min_timeout": 3.1,
    "raft_max_timeout": 3.4,
    "leader_fallback_timeout": 600.0,
}


def _lead(tmp_path, **settings):
    node = ticked_node(tmp_path, peers=PEERS, **QUIET, **settings)
    lead_with_peers(node)
    for k in range(2):  # both peers hold the no-op: nothing is left to send them
        ack(node, peer(node, k), node.last_log_index())
    tick(node)
    return node


def test_the_commit_index_of_an_apply_goes_with_the_next_proposal(tmp_path):
    node = _lead(tmp_path, commit_told_within_s=60.0)
    index = _commit_one(node, 1_000)
    tick(node, 3)
    assert _appends(node) == []  # no append of its own for the commit index

    propose(node, 2_000)
    tick(node)
    sent = _appends(node)
    assert {p for p, _ in sent} == set(node.otherNodes)
    assert all(m["commit_index"] == index and m["entries"] for _, m in sent), sent


def test_with_no_proposal_the_commit_index_goes_within_its_time(tmp_path):
    node = _lead(tmp_path, commit_told_within_s=0.05)
    index = _commit_one(node, 1_000)
    assert _appends(node) == []
    time.sleep(0.2)
    tick(node)
    sent = _appends(node)
    assert {p for p, _ in sent} == set(node.otherNodes)
    assert all(m["commit_index"] == index for _, m in sent), sent


def test_told_at_once_each_apply_sends_the_commit_index_in_an_append_of_its_own(tmp_path):
    """pysyncobj's way (0): the appends the setting saves."""
    node = _lead(tmp_path, commit_told_within_s=0.0)
    index = _commit_one(node, 1_000)  # the tick that applies sends the commit index at once
    sent = _appends(node)
    assert {p for p, _ in sent} == set(node.otherNodes)
    assert all(m["commit_index"] == index and not m.get("entries") for _, m in sent), sent


def test_by_default_the_commit_index_goes_within_a_tick(tmp_path):
    node = ticked_node(tmp_path, peers=PEERS)
    assert node._commit_told_within() == node.settings.tick_s
