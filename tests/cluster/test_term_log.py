"""Each change of a node's term or of the leader it knows is one line of its log: the
term, and whom it follows, or that it stands or leads (RaftNode._tick_leader). An
operator reads elections, and who stood in them, from the nodes' logs."""

from __future__ import annotations

import logging

import pytest

from .ticked import crash, heartbeat, lead_with_peers, peer, stand, tick, ticked_node

PEERS = ("127.0.0.1:1", "127.0.0.1:2")
LOGGER = "horologe.cluster.raft.node"


@pytest.fixture
def node(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    node = ticked_node(tmp_path, peers=PEERS)
    node.connected_nodes |= node.otherNodes
    yield node
    crash(node)


def _terms_logged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.getMessage().startswith("term ")]


def test_a_node_logs_when_it_stands_whom_it_follows_and_nothing_while_neither_changes(node, caplog):
    tick(node, 3)
    assert _terms_logged(caplog) == []  # a start, no leader known: nothing to say yet
    stand(node)
    tick(node, 3)
    heartbeat(node, peer(node, 1), 2, sent_at=1.0)
    tick(node, 3)
    assert _terms_logged(caplog) == ["term 1: standing for election", "term 2: following 127.0.0.1:2"]


def test_a_node_logs_when_it_leads(node, caplog):
    lead_with_peers(node)
    tick(node, 3)
    assert _terms_logged(caplog)[-1] == "term 1: leading"
