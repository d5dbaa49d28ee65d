"""A deposed master stops at once: a leader serves only while a majority heard one of its
appends within the election timeout, and a node that heard its leader that recently drops
vote requests, so no other leader can be elected meanwhile (cluster/raft/node.py, the read
lease; docs/cluster.md, "A deposed master stops at once")."""

from __future__ import annotations

from horologe.cluster.raft import node as raft_node

from .ticked import crash, lead_with_peers, peer, send_now, tick, ticked_node

PEERS = ("127.0.0.1:1", "127.0.0.1:2")


def _run_posts(node) -> None:
    posted, node._crossing.posted = node._crossing.posted, []
    for fn, args in posted:
        fn(*args)


def _last_append_to(node, follower) -> dict:
    return [m for p, m in node.sent if p == follower and m.get("type") == "append_entries"][-1]


def test_a_leader_serves_while_a_majority_heard_it_and_stops_when_none_has(tmp_path, monkeypatch):
    node = ticked_node(tmp_path, peers=PEERS)
    try:
        lead_with_peers(node)
        _run_posts(node)
        assert not node.lease_held()  # elected, but no follower has answered an append yet
        send_now(node)
        follower = peer(node, 0)
        sent_at = _last_append_to(node, follower)["sent_at"]
        answer = {"type": "next_node_idx", "next_node_idx": 1, "reset": False, "success": False}
        node._on_message(follower, answer | {"term": node.raftCurrentTerm, "echo": sent_at})
        tick(node)
        _run_posts(node)
        assert node.status.lease_until == sent_at + node.settings.raft_min_timeout - raft_node.LEASE_MARGIN_S
        assert node.lease_held()
        # Cut off: nobody answers; once the lease from that append ran out, it serves nothing.
        later = node.status.lease_until + 0.001
        monkeypatch.setattr(raft_node, "monotonic_time", lambda: later)
        assert not node.lease_held()
    finally:
        crash(node)


def test_an_answer_of_another_term_gives_no_lease(tmp_path):
    node = ticked_node(tmp_path, peers=PEERS)
    try:
        lead_with_peers(node)
        send_now(node)
        follower = peer(node, 0)
        sent_at = _last_append_to(node, follower)["sent_at"]
        answer = {"type": "next_node_idx", "next_node_idx": 1, "reset": False, "success": False}
        node._on_message(follower, answer | {"term": node.raftCurrentTerm - 1, "echo": sent_at})
        tick(node)
        _run_posts(node)
        assert not node.lease_held()
    finally:
        crash(node)


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


def test_a_follower_that_heard_its_leader_refuses_its_vote_and_echoes_the_append(tmp_path, monkeypatch):
    node = ticked_node(tmp_path, peers=PEERS)
    try:
        leader, candidate = peer(node, 0), peer(node, 1)
        node._on_message(leader, _heartbeat(1, 123.0))
        tick(node)
        answers = [m for p, m in node.sent if p == leader and m.get("type") == "next_node_idx"]
        assert answers and answers[-1]["echo"] == 123.0
        vote = {"type": "request_vote", "term": 2, "last_log_term": 0, "last_log_index": 100}
        node._on_message(candidate, vote)
        assert not [m for p, m in node.sent if p == candidate and m.get("type") == "response_vote"]
        assert node.votes_withheld == 1
        assert node.raftCurrentTerm == 2  # its term is taken: a later leader's appends are heard
        # an election a transfer asked for is answered at once
        node._on_message(candidate, vote | {"term": 3, "transfer": True})
        assert [m for p, m in node.sent if p == candidate and m.get("type") == "response_vote"]
    finally:
        crash(node)


def test_once_the_election_timeout_passed_without_the_leader_the_follower_votes(tmp_path, monkeypatch):
    node = ticked_node(tmp_path, peers=PEERS)
    try:
        leader, candidate = peer(node, 0), peer(node, 1)
        node._on_message(leader, _heartbeat(1, 123.0))
        heard = node._leader_contact_at
        timeout = node.settings.raft_min_timeout
        monkeypatch.setattr(raft_node, "monotonic_time", lambda: heard + timeout + 1e-6)
        vote = {"type": "request_vote", "term": 2, "last_log_term": 0, "last_log_index": 100}
        node._on_message(candidate, vote)
        assert [m for p, m in node.sent if p == candidate and m.get("type") == "response_vote"]
    finally:
        crash(node)


def test_an_election_a_transfer_asked_for_says_so(tmp_path):
    node = ticked_node(tmp_path, peers=PEERS)
    try:
        leader = peer(node, 0)
        node.connected_nodes |= node.otherNodes
        node._on_message(leader, _heartbeat(1, 123.0))
        node._on_message(leader, {"type": "timeout_now", "term": 1})
        tick(node)
        votes = [m for _, m in node.sent if m.get("type") == "request_vote"]
        assert len(votes) == 2 and all(v["term"] == 2 and v["transfer"] for v in votes)
    finally:
        crash(node)


def _leader_with_lease(tmp_path):
    node = ticked_node(tmp_path, peers=PEERS)
    lead_with_peers(node)
    send_now(node)
    follower = peer(node, 0)
    sent_at = _last_append_to(node, follower)["sent_at"]
    answer = {"type": "next_node_idx", "next_node_idx": 1, "reset": False, "success": False}
    node._on_message(follower, answer | {"term": node.raftCurrentTerm, "echo": sent_at})
    assert node._lease_until() > 0
    return node


def _votes_to(node, candidate) -> list:
    return [m for p, m in node.sent if p == candidate and m.get("type") == "response_vote"]


def test_a_leader_that_stepped_down_refuses_votes_until_its_lease_ran_out(tmp_path):
    node = _leader_with_lease(tmp_path)
    try:
        lease = node._lease_until()
        candidate = peer(node, 1)
        vote = {"type": "request_vote", "last_log_term": 99, "last_log_index": 10_000}
        node._on_message(candidate, vote | {"term": node.raftCurrentTerm + 1})
        assert not node._isLeader()  # the later term is taken: it steps down
        assert _votes_to(node, candidate) == []
        assert node._former_lease == lease
        node._on_message(candidate, vote | {"term": node.raftCurrentTerm + 1})  # asked again, later
        assert _votes_to(node, candidate) == []  # its lease may still hold: no vote yet
    finally:
        crash(node)


def test_the_loop_learns_a_step_down_with_the_status_that_says_so(tmp_path):
    """A pull the role change wakes asks require_master again: the status it reads must not
    still say master."""
    node = _leader_with_lease(tmp_path)
    try:
        node._crossing.posted = []
        vote = {"type": "request_vote", "last_log_term": 99, "last_log_index": 10_000, "transfer": True}
        node._on_message(peer(node, 1), vote | {"term": node.raftCurrentTerm + 1})
        roles = [args for fn, args in node._crossing.posted if fn.__name__ == "_role_on_loop"]
        assert len(roles) == 1
        leads, status = roles[0]
        assert not leads and not status.is_master
    finally:
        crash(node)


def test_a_follower_votes_for_the_leader_it_last_heard_standing_again(tmp_path):
    node = ticked_node(tmp_path, peers=PEERS)
    try:
        leader = peer(node, 0)
        node._on_message(leader, _heartbeat(1, 123.0))
        vote = {"type": "request_vote", "term": 2, "last_log_term": 0, "last_log_index": 100}
        node._on_message(leader, vote)
        assert _votes_to(node, leader)
    finally:
        crash(node)


def test_a_node_just_started_grants_no_vote_within_the_election_timeout(tmp_path):
    node = ticked_node(tmp_path, peers=PEERS)
    try:
        candidate = peer(node, 1)
        vote = {"type": "request_vote", "term": 1, "last_log_term": 0, "last_log_index": 100}
        node._on_message(candidate, vote)
        assert _votes_to(node, candidate) == [] and node.votes_withheld == 1
    finally:
        crash(node)
