"""A master asked to change the membership answers once, and soon, whatever becomes of
its lead.

A removal proposed by a master that then lost its lead was answered only when that
master applied the entry as a follower; a snapshot installed past it meant never
(pysyncobj drops a waiting callback then): the admin's ``DELETE /admin/cluster/members/{node_id}``
waited its whole 30 s for "no answer", and the simulator's membership driver for ever
(seed 920052 with ``--service --power-loss --membership --out-of-order --timed-waits
--hold --schedules --lateness --retention``: the master n2 was stopped right after
proposing the removal of n3, the others elected, and n2 came back by a snapshot). An
addition already answered so (``not_committed``: it may still be made).
"""

from __future__ import annotations

from horologe.cluster.raft.dial_node import DialNode

from .test_snapshot_messages import PEERS
from .ticked import commit_with, crash, heartbeat, lead_with_peers, peer, tick, ticked_node


def test_a_removal_proposed_by_a_master_that_loses_its_lead_is_answered_as_maybe_made(tmp_path):
    leader = ticked_node(tmp_path / "n0", peers=PEERS)
    try:
        lead_with_peers(leader)
        fast, removed = peer(leader, 0), peer(leader, 1)
        commit_with(leader, fast, 1_000, 2)  # an entry of its term committed: changes may start
        answers = []
        leader.change_membership("rem", DialNode(removed.address), 0.0, answers.append)
        tick(leader, 2)  # asked, then proposed; never acknowledged
        assert leader.membership_change_of(leader._get_entries(leader.last_log_index())[0][0])
        leader._crossing.run_all()
        assert not answers

        heartbeat(leader, fast, leader.current_term() + 1)  # the other member leads a later term
        tick(leader)
        leader._crossing.run_all()
        assert len(answers) == 1 and answers[0][0] == "not_committed", answers

        tick(leader, 3)
        leader._crossing.run_all()
        assert len(answers) == 1, "answered once"
    finally:
        crash(leader)
