"""A follower stands for election only once a majority of its members would vote for it
(Raft's pre-vote: cluster/raft/pre_vote.py; docs/cluster.md, "A follower that alone stops
hearing the master"). Neither the asker nor a member changes its term for a pre-vote."""

from __future__ import annotations

import pytest
from pysyncobj import syncobj

from horologe.cluster.raft import node as raft_node
from horologe.cluster.raft.dial_node import DialNode
from horologe.cluster.raft.node import KEEPALIVE
from horologe.cluster.raft.pre_vote import LATER_TERM, Round, would_vote

from .ticked import (
    crash,
    deadline_passed,
    heartbeat,
    lead_with_peers,
    peer,
    run_for,
    stand,
    tick,
    ticked_node,
)

PEERS = ("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4")
VOTE = {"type": "request_vote", "last_log_term": 1, "last_log_index": 100}


@pytest.fixture
def node(tmp_path):
    """A node with four named peers (five members), never reached, past its first tick
    (before which it stands in nothing: it knows only its configured membership)."""
    node = ticked_node(tmp_path, peers=PEERS)
    node.connected_nodes |= node.otherNodes
    tick(node)
    yield node
    crash(node)


def _sent(node, kind: str) -> list[tuple[object, dict]]:
    return [(p, m) for p, m in node.sent if m.get("type") == kind]


def _grant(node, k: int, term: int) -> None:
    node._on_message(peer(node, k), {"type": "pre_vote_answer", "term": term, "granted": True})


def _ask(term: int, last_index: int = 0, last_term: int = 0) -> dict:
    return {"type": "pre_vote", "term": term, "last_log_index": last_index, "last_log_term": last_term}


def _clock_at(monkeypatch, at: float) -> None:
    monkeypatch.setattr(raft_node, "monotonic_time", lambda: at)


def test_a_follower_past_its_deadline_asks_first_and_stands_once_a_majority_would_vote(node):
    deadline_passed(node)
    tick(node)
    asks = _sent(node, "pre_vote")
    assert sorted(p.address for p, _ in asks) == sorted(PEERS)
    assert {m["term"] for _, m in asks} == {1}
    assert node.raftCurrentTerm == 0 and not node.is_candidate()  # nothing changed yet
    assert not _sent(node, "request_vote")
    _grant(node, 0, 1)
    _grant(node, 0, 1)  # the same member twice counts once
    _grant(node, 1, 2)  # an answer about another term counts for nothing
    tick(node)
    assert not _sent(node, "request_vote") and node.raftCurrentTerm == 0
    _grant(node, 2, 1)  # three of five with its own
    tick(node)
    assert node.raftCurrentTerm == 1 and node.is_candidate()
    assert len(_sent(node, "request_vote")) == len(PEERS)


def test_a_round_that_fails_asks_again_after_a_fresh_election_timeout(node, monkeypatch):
    deadline_passed(node)
    tick(node)
    deadline = node.election_deadline
    assert deadline > raft_node.monotonic_time()
    node.sent.clear()
    _clock_at(monkeypatch, deadline + 0.001)
    tick(node)
    assert len(_sent(node, "pre_vote")) == len(PEERS)
    assert node.raftCurrentTerm == 0


def test_a_member_that_hears_its_leader_refuses_and_keeps_its_term(node, monkeypatch):
    leader, asker = peer(node, 0), peer(node, 1)
    heartbeat(node, leader, 1, sent_at=1.0)
    node._on_message(asker, _ask(2, last_index=100, last_term=1))
    assert _sent(node, "pre_vote_answer")[-1] == (
        asker,
        {"type": "pre_vote_answer", "term": 2, "granted": False},
    )
    assert node.raftCurrentTerm == 1 and node.pre_votes_refused == 1
    # the election timeout since it heard its leader passed: it grants
    run_for(node, monkeypatch, node.settings.raft_min_timeout)
    node._on_message(asker, _ask(2, last_index=100, last_term=1))
    assert _sent(node, "pre_vote_answer")[-1][1]["granted"] is True
    assert node.raftCurrentTerm == 1
    # a log behind its own, or a term behind its own, is refused as a vote would be
    node._on_message(asker, _ask(2, last_index=0, last_term=0))
    node._on_message(asker, _ask(0, last_index=100, last_term=1))
    assert [m["granted"] for _, m in _sent(node, "pre_vote_answer")[-2:]] == [False, False]


def test_a_member_counts_only_the_silence_it_ran_through(node, monkeypatch):
    """A member stopped longer than the election timeout (SIGSTOP, a starved CPU, a slow
    fsync) may take a pre-vote that waited on its link before the leader's append that
    waited beside it. It did not hear the leader because it was not running, not because
    the leader fell silent: it refuses. A stop counts for two of its longest tick waits
    at most (``awake_clock.py``), as etcd's raft counts its own ticks, not the time."""
    leader, asker = peer(node, 0), peer(node, 1)
    heartbeat(node, leader, 1, sent_at=1.0)
    heard = raft_node.monotonic_time()
    _clock_at(monkeypatch, heard + 0.02)
    tick(node)
    _clock_at(monkeypatch, heard + 5.0)  # stopped: no tick for 5 s, then the ask is read
    node._on_message(asker, _ask(2, last_index=100, last_term=1))
    node._on_message(asker, VOTE | {"term": 2})
    assert _sent(node, "pre_vote_answer")[-1][1]["granted"] is False
    assert not _sent(node, "response_vote") and node.votes_withheld == 1
    # running for an election timeout without hearing the leader: it grants
    run_for(node, monkeypatch, node.settings.raft_min_timeout)
    node._on_message(asker, _ask(2, last_index=100, last_term=1))
    assert _sent(node, "pre_vote_answer")[-1][1]["granted"] is True


def test_a_follower_whose_deadline_passed_while_it_was_stopped_asks_once_it_ran_through_it(node, monkeypatch):
    """Its leader's append may be waiting on its link, not yet read: it asks nothing, and
    names its leader still, until it has run through an election timeout unheard."""
    leader = peer(node, 0)
    heartbeat(node, leader, 1)
    heard = raft_node.monotonic_time()
    _clock_at(monkeypatch, heard + 0.02)
    tick(node)
    _clock_at(monkeypatch, heard + 5.0)  # stopped far past its election deadline
    tick(node)
    assert not _sent(node, "pre_vote") and node.leader_address() == leader.address
    assert node.election_deadline > heard + 5.0
    run_for(node, monkeypatch, node.settings.raft_max_timeout)  # room for one round or two
    asks = _sent(node, "pre_vote")
    assert {p.address for p, _ in asks} == set(PEERS) and len(asks) in (len(PEERS), 2 * len(PEERS))
    assert node.leader_address() is None


def test_a_node_outside_the_membership_is_not_answered(node, monkeypatch):
    _clock_at(monkeypatch, node._leader_contact_at + 10)
    stranger = type(peer(node, 0))("127.0.0.1:9")
    node._on_message(stranger, _ask(5))
    assert not _sent(node, "pre_vote_answer")


def test_a_leader_heard_while_the_round_ran_keeps_it_from_standing(node, monkeypatch):
    deadline_passed(node)
    tick(node)
    later = raft_node.monotonic_time() + 0.01
    _clock_at(monkeypatch, later)
    heartbeat(node, peer(node, 3), 0)
    _grant(node, 0, 1)
    _grant(node, 1, 1)
    tick(node)
    assert node.raftCurrentTerm == 0 and not _sent(node, "request_vote")


def test_a_round_won_licenses_no_later_stand_once_a_leader_was_heard(node):
    """Won, then its leader heard before the tick that would stand: when its deadline
    next passes, it asks again, rather than standing on the round won before."""
    deadline_passed(node)
    tick(node)
    _grant(node, 0, 1)
    _grant(node, 1, 1)
    heartbeat(node, peer(node, 3), 0)
    tick(node)
    assert node.raftCurrentTerm == 0 and not _sent(node, "request_vote")
    node.sent.clear()
    deadline_passed(node)
    tick(node)
    assert node.raftCurrentTerm == 0 and not _sent(node, "request_vote")
    assert len(_sent(node, "pre_vote")) == len(PEERS)


def test_a_deadline_that_passes_later_in_the_tick_is_not_stood_in_without_a_pre_vote(node, monkeypatch):
    """pysyncobj reads the clock again for the deadline later in the tick (syncobj.py:635),
    after work that takes time: a deadline that passes in between is not stood in; the next
    tick finds it passed and asks for a pre-vote."""
    deadline_passed(node)
    now = raft_node.monotonic_time()
    _clock_at(monkeypatch, now)
    node.election_deadline = now + 0.001  # not passed as the tick begins
    monkeypatch.setattr(syncobj, "monotonicTime", lambda: now + 0.01)  # passed as pysyncobj looks
    tick(node)
    assert node.raftCurrentTerm == 0 and not _sent(node, "request_vote") and not _sent(node, "pre_vote")
    assert node.election_deadline == now + 0.001  # held for that look only
    _clock_at(monkeypatch, now + 0.01)
    tick(node)
    assert node.raftCurrentTerm == 0 and not _sent(node, "request_vote")
    assert len(_sent(node, "pre_vote")) == len(PEERS)


def test_a_node_outside_the_membership_stands_in_no_election_when_its_deadline_passed(tmp_path):
    """A joiner keeps its deadline ahead of it at each tick (node.py's ``_tick_voter``); one
    that had no tick for longer than an election timeout (a stall, a long start) finds it
    passed, and must still not stand: it is no member, and would raise its own term (and
    that of any member that already added it, when it asks for votes)."""
    joiner = ticked_node(tmp_path, peers=PEERS, join=True)
    joiner.connected_nodes |= joiner.otherNodes
    try:
        tick(joiner)
        joiner.election_deadline = 0
        tick(joiner)
        assert joiner.raftCurrentTerm == 0
        assert not _sent(joiner, "request_vote") and not _sent(joiner, "pre_vote")
    finally:
        crash(joiner)


def test_a_follower_that_asks_names_no_leader_until_it_hears_one_again(node):
    """Its readiness, status and proposals say it knows no master (as etcd's raft has a
    pre-candidate drop its leader), not the master it stopped hearing."""
    leader = peer(node, 3)
    heartbeat(node, leader, 0)
    tick(node)
    assert node.leader_address() == leader.address
    deadline_passed(node)
    tick(node)
    assert _sent(node, "pre_vote") and node.leader_address() is None
    changes = node.leader_changes
    heartbeat(node, leader, 0)
    tick(node)
    assert node.leader_address() == leader.address and node.raftCurrentTerm == 0
    assert node.leader_changes == changes + 1


def test_members_whose_keep_alives_know_no_pre_vote_count_as_granting(node):
    for k in (0, 1):  # an older version's keep-alive: no pre_vote flag
        node._on_message(peer(node, k), {"type": KEEPALIVE, "leader": None, "clock_ms": 1})
    node._on_message(peer(node, 1), {"type": KEEPALIVE, "leader": None, "clock_ms": 1, "pre_vote": True})
    deadline_passed(node)
    tick(node)
    assert node.raftCurrentTerm == 0
    _grant(node, 2, 1)  # with peer 0's presumed grant: three of five
    tick(node)
    assert node.raftCurrentTerm == 1


def test_an_election_a_transfer_asked_for_is_stood_in_at_once(node):
    node._on_message(peer(node, 0), {"type": "append_entries", "term": 0, "commit_index": 0, "entries": []})
    node._on_message(peer(node, 0), {"type": "timeout_now", "term": 0})
    tick(node)
    assert node.raftCurrentTerm == 1 and not _sent(node, "pre_vote")


def test_a_node_alone_stands_at_once(tmp_path):
    alone = ticked_node(tmp_path)
    try:
        tick(alone)  # its first tick took the membership of its (empty) log
        alone.election_deadline = 0  # just started: no election timeout of silence, no one to hear
        tick(alone)
        assert alone.raftCurrentTerm == 1 and not _sent(alone, "pre_vote")
    finally:
        crash(alone)


def test_the_rules():
    assert would_vote(3, 3, (2, 10), (2, 10))
    assert not would_vote(2, 3, (2, 10), (2, 10))
    assert not would_vote(4, 3, (2, 9), (2, 10))
    assert would_vote(4, 3, (3, 1), (2, 10))
    pre_vote = Round(4, 0.0, frozenset({"a", "b", "c", "d"}))
    pre_vote.grant("x")  # not a member
    pre_vote.grant("a")
    assert not pre_vote.won()
    pre_vote.grant("b")
    assert pre_vote.won()


# A node whose term got ahead of its leader's (it stood while cut off, and no vote
# request of that term reached the members, who then elected in an earlier term): its
# later pre-votes are refused while the members hear their leader, so it never stands to
# carry its term to them, and pysyncobj drops the leader's appends of the earlier term
# unanswered. Raft has an answer carry the later term, and the leader step down for it
# (etcd's raft answers such appends for the same reason, with the pre-vote on).


def test_a_node_ahead_of_its_leaders_term_answers_an_append_with_its_term(node):
    stand(node)
    stand(node)
    assert node.current_term() == 2 and not node.is_master()
    leader = peer(node, 0)
    node.sent.clear()
    heartbeat(node, leader, 1)
    assert node.sent == [(leader, {"type": LATER_TERM, "term": 2})]
    assert node.current_term() == 2 and node.followed_leader is None
    heartbeat(node, leader, 2)  # an append of its own term is taken, and not so answered
    assert node.followed_leader == leader
    assert not [m for _, m in node.sent[1:] if m["type"] == LATER_TERM]


def test_a_leader_told_a_later_term_by_a_member_steps_down_and_takes_it(tmp_path):
    node = ticked_node(tmp_path, peers=PEERS[:2])
    lead_with_peers(node)
    term = node.current_term()
    node._on_message(DialNode("127.0.0.1:9", None), {"type": LATER_TERM, "term": term + 5})
    assert node.is_master() and node.current_term() == term  # not a member: nothing
    node._on_message(peer(node, 1), {"type": LATER_TERM, "term": term})
    assert node.is_master() and node.current_term() == term  # not later: nothing
    node._on_message(peer(node, 1), {"type": LATER_TERM, "term": term + 2})
    assert not node.is_master() and node.current_term() == term + 2
    assert node.followed_leader is None
    assert node._journal.getCurrentTerm() == term + 2 and node._journal.getVotedForNodeId() is None
    crash(node)
