"""A snapshot message commits nothing of the follower's own log.

pysyncobj's follower checks its log against an ``append_entries`` only when the message
names ``prevLogIdx``. A snapshot chunk names none, yet pysyncobj still sets the commit
index to ``min(leader's commit, own last index)``: a former master holding entries it
appended but never committed then applied them, on the first chunk a new leader shipped it.
"""

from __future__ import annotations

import pytest

from .ticked import commit_alone, crash, journal_entries, lead_alone, peer, ship, tick, ticked_node

PEERS = ("127.0.0.1:1", "127.0.0.1:2")


@pytest.fixture
def history(tmp_path):
    """Entries 2..8 of term 1, from a real leader's journal."""
    leader = ticked_node(tmp_path / "leader")
    lead_alone(leader)
    commit_alone(leader, 1_000, 6)
    entries = journal_entries(leader)[1:]
    crash(leader)
    return entries


@pytest.mark.parametrize("chunk", [{"serialized": None}, {"serialized": (b"\x00", True, False)}])
def test_a_snapshot_message_leaves_the_commit_index_where_the_log_put_it(tmp_path, history, chunk):
    follower = ticked_node(tmp_path / "follower", peers=PEERS)
    try:
        old, new = peer(follower, 0), peer(follower, 1)
        # Term 1's leader sent entries 2..8 and had committed up to 4 (the rest never was).
        follower._on_message(
            old,
            {
                "type": "append_entries",
                "term": 1,
                "commit_index": 4,
                "prevLogIdx": 1,
                "prevLogTerm": 0,
                "entries": history,
            },
        )
        tick(follower)
        assert follower.raftCommitIndex == 4 == follower.raftLastApplied
        # Term 2's leader, whose log differs after 4, starts shipping its snapshot.
        follower._on_message(new, {"type": "append_entries", "term": 2, "commit_index": 100, **chunk})
        tick(follower, 3)
        assert follower.raftCommitIndex == 4
        assert follower.raftLastApplied == 4
        assert follower.state.store.applied_index == 4
    finally:
        crash(follower)


def leader_in_term_two(folder):
    """A node alone that led in term 1, restarted and leads in term 2, whose store holds
    entry 4 of term 2 (watermark 5,000), and a dump of it."""
    first = ticked_node(folder)
    lead_alone(first)  # term 1: its election's entry at 2
    crash(first)
    leader = ticked_node(folder)
    lead_alone(leader)  # term 2: at 3
    commit_alone(leader, 5_000, 1)  # at 4
    leader.forceLogCompaction()
    tick(leader, 2)
    assert leader._dump.current().index == 4
    assert (leader.state.store.applied_index, leader.state.store.meta("applied_term")) == (4, 2)
    return leader


def follow_history(follower, history, commit: int) -> None:
    message = {"type": "append_entries", "term": 1, "commit_index": commit, "prevLogIdx": 1, "prevLogTerm": 0}
    follower._on_message(peer(follower, 0), message | {"entries": history})
    tick(follower)


def test_a_shipped_store_replaces_one_that_holds_another_history_at_the_same_index(tmp_path, history):
    """Defence in depth: with the commit rule above, a follower's store holds only committed
    entries, which every later leader's snapshot holds too. Should it hold another term's
    entry at the snapshot's index all the same, the install replaces it: the store used to
    be kept whenever its index was not behind the snapshot's."""
    leader = leader_in_term_two(tmp_path / "term-two")
    follower = ticked_node(tmp_path / "follower", peers=PEERS)
    try:
        follow_history(follower, history, 4)
        assert (follower.state.store.applied_index, follower.state.store.meta("applied_term")) == (4, 1)
        ship(leader, follower, peer(follower, 1), term=2)
        store = follower.state.store
        assert (store.applied_index, store.meta("applied_term")) == (4, 2)
        assert follower.state.ws.ms == leader.state.ws.ms == 5_000
    finally:
        crash(leader)
        crash(follower)
