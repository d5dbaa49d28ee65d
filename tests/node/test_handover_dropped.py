"""A release (node/handover.py) whose entries Raft dropped because this node lost the lead
meanwhile: what was asked happened, so the answer is no "resend" (no_master); and one that
stepped down with no successor in sight says so."""

from __future__ import annotations

import asyncio
import time

import pytest

from horologe.client.calls import REFUSED_503
from horologe.cluster import SYNC, EntryDroppedError, Peer, ProposalRejectedError
from horologe.node.config import NodeConfig
from horologe.node.errors import Refused, TransferUnconfirmed
from horologe.node.handover import Handover


def test_a_release_whose_entries_were_dropped_is_not_a_refusal_to_resend(tmp_path):
    proposed = []

    async def propose(kind, **fields):
        proposed.append(kind)
        raise EntryDroppedError("this node stopped leading before the entry was appended; nothing was done")

    async def transfer(to, timeout):
        raise AssertionError("no transfer once the lead is lost")

    handover = _handover(tmp_path, propose, transfer, lambda: False)
    with pytest.raises(ProposalRejectedError, match="stopped leading during the release") as e:
        asyncio.run(handover.release(None))
    assert not isinstance(e.value, EntryDroppedError)
    assert proposed == [SYNC] and not handover.releasing


def test_a_release_that_stepped_down_with_no_successor_in_sight_does_not_say_it_still_leads(
    tmp_path, monkeypatch
):
    """The transfer made this node step down, and no other master was heard of in time:
    the answer said "this node is still master", which it no longer was."""
    leading = [True]

    async def propose(kind, **fields):
        return None

    async def transfer(to, timeout):
        leading[0] = False  # stepped down; the election that follows is not over yet
        return True

    handover = _handover(tmp_path, propose, transfer, lambda: leading[0])
    monkeypatch.setattr(time, "monotonic", _fast_clock())
    with pytest.raises(Refused) as e:
        asyncio.run(handover.release(None))
    assert "still master" not in str(e.value) and "stepped down" in str(e.value)
    # took effect, unconfirmed: not the code of a release that did nothing, which the SDK resends
    assert isinstance(e.value, TransferUnconfirmed) and e.value.code not in REFUSED_503


def test_a_release_settles_what_the_master_runs_first_and_waits_for_it_a_while_at_most(tmp_path, monkeypatch):
    """Push settles its open requests before the release proposes none but its own entries
    (the acks would be refused after); a receiver that hangs must not hold the release past
    the graceful stop's budget (node/main.py's RELEASE_ON_SHUTDOWN_S)."""
    monkeypatch.setattr("horologe.node.handover.SETTLE_S", 0.05)
    seen = []

    async def propose(kind, **fields):
        seen.append(kind)
        raise EntryDroppedError("this node stopped leading before the entry was appended; nothing was done")

    async def transfer(to, timeout):
        raise AssertionError("no transfer once the lead is lost")

    async def settle():
        seen.append(("settling, releasing:", handover.releasing))
        await asyncio.Event().wait()  # a receiver that never answers

    handover = _handover(tmp_path, propose, transfer, lambda: False, settle)
    with pytest.raises(ProposalRejectedError):
        asyncio.run(asyncio.wait_for(handover.release(None), 5))
    assert seen == [("settling, releasing:", False), SYNC]


def _fast_clock():
    """A monotonic clock that moves a second a read: waits of seconds end at once."""
    now = [0.0]

    def read() -> float:
        now[0] += 1.0
        return now[0]

    return read


def _handover(tmp_path, propose, transfer, is_master, settle=None) -> Handover:
    """A release's handover on node n1 of n1 and n2, over the calls a test gives."""
    peer = Peer("n2", "127.0.0.1:7002", "127.0.0.1:8002")
    config = NodeConfig(node_id="n1", data_dir=str(tmp_path), http="127.0.0.1:8001", raft="127.0.0.1:7001")

    async def readiness(url, timeout):
        return {"links": {"n1": True}}

    async def paused():
        return None

    return Handover(
        config,
        readiness,
        require_master=lambda: None,
        is_master=is_master,
        leader_id=lambda: None,
        linked_peer_ids=lambda: {"n2"},
        peers=lambda: (peer,),
        propose=propose,
        transfer=transfer,
        pause_leading=paused,
        resume_leading=lambda: None,
        **({"settle_leading": settle} if settle else {}),
    )
