"""A deposed master stops at once: a leader serves only while a majority heard one of its
appends within the election timeout, and a node that heard its leader that recently grants
no vote, so no other leader can be elected meanwhile (cluster/raft/node.py, the read
lease; docs/cluster.md, "A deposed master stops at once")."""

from __future__ import annotations

import pytest

from horologe.cluster.raft import node as raft_node

from .ticked import crash, lead_with_peers, peer, run_for, send_now, tick, ticked_node

PEERS = ("127.0.0.1:1", "127.0.0.1:2")
VOTE = {"type": "request_vote", "last_log_term": 0, "last_log_index": 100}


@pytest.fixture
def node(tmp_path):
    """A node with two named peers, never reached, past its first tick (before which it
    stands in nothing: it knows only its configured membership)."""
    node = ticked_node(tmp_path, peers=PEERS)
    tick(node)
    yield node
    crash(node)


def _sent(node, to, kind: str) -> list[dict]:
    return [m for p, m in node.sent if p == to and m.get("type") == kind]


def _echo_answer(node, term_offset: int = 0) -> float:
    """Its first follower answers the leader ``node``'s latest append, echoing its send
    time, in the leader's term (plus ``term_offset``); returns that send time."""
    send_now(node)
    follower = peer(node, 0)
    sent_at = _sent(node, follower, "append_entries")[-1]["sent_at"]
    answer = {"type": "next_node_idx", "next_node_idx": 1, "reset": False, "success": False}
    node._on_message(follower, answer | {"term": node.raftCurrentTerm + term_offset, "echo": sent_at})
    return sent_at


def _heartbeat(term: int, sent_at: float) -> dict:
    return {
        "type": "append_entries",
        "term": term,
        "commit_index": 0,
        "prevLogIdx": 0,
        "prevLogTerm": 0,
        "entries": [],
        "sent_at": sent_at,
    }


def test_a_leader_serves_while_a_majority_heard_it_and_stops_when_none_has(node, monkeypatch):
    lead_with_peers(node)
    node._crossing.run_all()
    assert not node.lease_held()  # elected, but no follower has answered an append yet
    sent_at = _echo_answer(node)
    tick(node)
    node._crossing.run_all()
    assert node.status.lease_until == sent_at + node.settings.raft_min_timeout - raft_node.LEASE_MARGIN_S
    assert node.lease_held()
    # Cut off: nobody answers; once the lease from that append ran out, it serves nothing.
    _clock_at(monkeypatch, node.status.lease_until + 0.001)
    assert not node.lease_held()


def _clock_at(monkeypatch, at: float) -> None:
    """The node's monotonic clock reads ``at`` from now on."""
    monkeypatch.setattr(raft_node, "monotonic_time", lambda: at)


def _window_end(node) -> float:
    """The last moment of the election timeout since the node last heard a leader (or
    started): a vote asked then is still refused."""
    return node._leader_contact_at + node.settings.raft_min_timeout - 0.001


def test_an_answer_of_another_term_gives_no_lease(node):
    lead_with_peers(node)
    _echo_answer(node, term_offset=-1)
    tick(node)
    node._crossing.run_all()
    assert not node.lease_held()


def test_a_follower_that_heard_its_leader_refuses_its_vote_and_echoes_the_append(node, monkeypatch):
    leader, candidate = peer(node, 0), peer(node, 1)
    node._on_message(leader, _heartbeat(1, 123.0))
    tick(node)
    answers = _sent(node, leader, "next_node_idx")
    assert answers and answers[-1]["echo"] == 123.0
    _clock_at(monkeypatch, _window_end(node))
    node._on_message(candidate, VOTE | {"term": 2})
    assert not _sent(node, candidate, "response_vote")
    assert node.votes_withheld == 1
    assert node.raftCurrentTerm == 2  # its term is taken: a later leader's appends are heard
    # an election a transfer asked for is answered at once
    node._on_message(candidate, VOTE | {"term": 3, "transfer": True})
    assert _sent(node, candidate, "response_vote")


def test_once_the_election_timeout_passed_without_the_leader_the_follower_votes(node, monkeypatch):
    leader, candidate = peer(node, 0), peer(node, 1)
    node._on_message(leader, _heartbeat(1, 123.0))
    run_for(node, monkeypatch, node.settings.raft_min_timeout)
    node._on_message(candidate, VOTE | {"term": 2})
    assert _sent(node, candidate, "response_vote")


def test_an_election_a_transfer_asked_for_says_so(node):
    leader = peer(node, 0)
    node.connected_nodes |= node.otherNodes
    node._on_message(leader, _heartbeat(1, 123.0))
    node._on_message(leader, {"type": "timeout_now", "term": 1})
    tick(node)
    votes = [m for _, m in node.sent if m.get("type") == "request_vote"]
    assert len(votes) == 2 and all(v["term"] == 2 and v["transfer"] for v in votes)


@pytest.fixture
def leader(node):
    """``node`` leading, with a lease: a follower echoed one of its appends."""
    lead_with_peers(node)
    _echo_answer(node)
    assert node._lease_until() > 0
    return node


def test_a_leader_that_stepped_down_refuses_votes_until_its_lease_ran_out(leader, monkeypatch):
    lease = leader._lease_until()
    _clock_at(monkeypatch, lease - 0.001)  # its lease's end
    candidate = peer(leader, 1)
    vote = VOTE | {"last_log_term": 99, "last_log_index": 10_000}
    leader._on_message(candidate, vote | {"term": leader.raftCurrentTerm + 1})
    assert not leader._isLeader()  # the later term is taken: it steps down
    assert _sent(leader, candidate, "response_vote") == []
    assert leader._former_lease == lease
    leader._on_message(candidate, vote | {"term": leader.raftCurrentTerm + 1})  # asked again, later
    assert _sent(leader, candidate, "response_vote") == []  # its lease may still hold: no vote yet


def test_the_loop_learns_a_step_down_with_the_status_that_says_so(leader):
    """A pull the role change wakes asks require_master again: the status it reads must not
    still say master."""
    leader._crossing.posted = []
    vote = VOTE | {"last_log_term": 99, "last_log_index": 10_000, "transfer": True}
    leader._on_message(peer(leader, 1), vote | {"term": leader.raftCurrentTerm + 1})
    roles = [args for fn, args in leader._crossing.posted if fn.__name__ == "_role_on_loop"]
    assert len(roles) == 1
    leads, status = roles[0]
    assert not leads and not status.is_master


def test_a_follower_votes_for_the_leader_it_last_heard_standing_again(node):
    leader = peer(node, 0)
    node._on_message(leader, _heartbeat(1, 123.0))
    node._on_message(leader, VOTE | {"term": 2})
    assert _sent(node, leader, "response_vote")


def test_a_node_just_started_grants_no_vote_within_the_election_timeout(node, monkeypatch):
    """By the node's clock, read at the last moment of the window: the fixture itself may
    take longer than the window on a loaded machine (a clean-clone run granted the vote)."""
    candidate = peer(node, 1)
    _clock_at(monkeypatch, _window_end(node))
    node._on_message(candidate, VOTE | {"term": 1})
    assert _sent(node, candidate, "response_vote") == [] and node.votes_withheld == 1
