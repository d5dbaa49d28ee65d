"""The loop learns this node's Raft state only from what the tick thread posts through the
crossing (cluster/raft/status.py): a frozen status, sent when it changes, not read from
pysyncobj's members, which the tick thread writes."""

from __future__ import annotations

import pytest
from pysyncobj.syncobj import FAIL_REASON

from horologe.cluster.raft.status import STARTING, RaftStatus, Role

from .ticked import commit_alone, crash, lead_alone, tick, ticked_node


def _statuses(posted) -> list[RaftStatus]:
    """The statuses posted: alone, or riding along with an applied entry."""
    return [args[-1] for fn, args in posted if fn.__name__ in ("_take_status", "_applied_on_loop")]


def test_the_loop_sees_the_lead_once_the_status_is_posted(tmp_path):
    node = ticked_node(tmp_path)
    try:
        lead_alone(node)
        assert node.status is STARTING  # nothing posted has run: the loop knows nothing yet
        posted = node._crossing.run_all()
        status = node.status
        assert status.is_master and status.role is Role.MASTER and status.term == node.current_term()
        assert status.leader == node.settings.raft
        assert _statuses(posted)[-1] is status
    finally:
        crash(node)


@pytest.fixture
def leader(tmp_path):
    """A node leading alone, whose posts so far the loop has run."""
    node = ticked_node(tmp_path)
    lead_alone(node)
    node._crossing.run_all()
    yield node
    crash(node)


def test_a_status_is_posted_on_a_change_not_on_every_tick(leader):
    tick(leader, 50)  # nothing changes
    assert leader._crossing.run_all() == []
    commit_alone(leader, 1_000, 3)  # each applied entry brings the status along
    leader._crossing.run_all()
    assert leader.status.commit_index == leader.raftCommitIndex >= leader.raftLastApplied


def test_a_replica_halted_outside_an_apply_refuses_proposals_once_the_loop_knows(leader):
    leader._halt("cannot load the Raft dump: test")
    leader._crossing.run_all()
    answers = []
    leader.apply_entry(b"x", callback=lambda res, err: answers.append(err))
    assert answers == [FAIL_REASON.REQUEST_DENIED]
