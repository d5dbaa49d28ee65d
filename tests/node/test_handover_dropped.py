"""A release whose entries Raft dropped because this node lost the lead meanwhile
(node/handover.py): what was asked happened, so the answer is no "resend" (no_master)."""

from __future__ import annotations

import asyncio

import pytest

from horologe.cluster import SYNC, EntryDroppedError, Peer, ProposalRejectedError
from horologe.node.config import NodeConfig
from horologe.node.handover import Handover


def test_a_release_whose_entries_were_dropped_is_not_a_refusal_to_resend(tmp_path):
    peer = Peer("n2", "127.0.0.1:7002", "127.0.0.1:8002")
    config = NodeConfig(node_id="n1", data_dir=str(tmp_path), http="127.0.0.1:8001", raft="127.0.0.1:7001")
    proposed = []

    async def propose(kind, **fields):
        proposed.append(kind)
        raise EntryDroppedError("this node stopped leading before the entry was appended; nothing was done")

    async def readiness(url, timeout):
        return {"links": {"n1": True}}

    async def transfer(to, timeout):
        raise AssertionError("no transfer once the lead is lost")

    async def paused():
        return None

    handover = Handover(
        config,
        readiness,
        require_master=lambda: None,
        is_master=lambda: False,
        leader_id=lambda: None,
        linked_peer_ids=lambda: {"n2"},
        peers=lambda: (peer,),
        propose=propose,
        transfer=transfer,
        pause_leading=paused,
        resume_leading=lambda: None,
    )
    with pytest.raises(ProposalRejectedError, match="stopped leading during the release") as e:
        asyncio.run(handover.release(None))
    assert not isinstance(e.value, EntryDroppedError)
    assert proposed == [SYNC] and not handover.releasing
