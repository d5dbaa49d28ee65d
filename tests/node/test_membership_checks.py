"""The checks the master makes of a node it is asked to add, on what the node's ``/readyz``
says (node/membership.py), before any feeding. The node must dial this master: pysyncobj
knows a peer by its Raft address, whatever id the node's config gives it
(tests/integration/test_membership.py adds such nodes on real processes)."""

from __future__ import annotations

import asyncio

import pytest

from horologe.cluster.raft.membership import Member
from horologe.node.errors import MembershipChangeRefused
from horologe.node.membership import Membership

OWN = "127.0.0.1:7001"
MEMBERS = (Member("n1", OWN, "127.0.0.1:8001"), Member("n2", "127.0.0.1:7002", "127.0.0.1:8002"))
NEW = Member("n3", "127.0.0.1:7003", "127.0.0.1:8003")
ADDED = [Member(NEW.node_id, NEW.raft, NEW.http)]


def _add(ready: dict | None) -> list[Member]:
    """Ask for NEW's add with ``ready`` as its ``/readyz``; the members the Raft shell was
    asked to add."""
    added: list[Member] = []

    async def add(member, catch_up_s, applied):
        added.append(member)

    async def readiness(http):
        return ready

    async def remove(raft):
        raise AssertionError("no removal")

    membership = Membership(
        require_master=lambda: None,
        members=lambda: MEMBERS,
        linked=lambda: {m.raft for m in MEMBERS[1:]},
        own_raft=OWN,
        add=add,
        remove=remove,
        readiness=readiness,
    )
    asyncio.run(membership.add(NEW.node_id, NEW.raft, NEW.http, 10.0))
    return added


def _ready(**fields) -> dict:
    return {"node_id": NEW.node_id, "raft": NEW.raft, "join": True, **fields}


def test_a_node_that_dials_the_master_is_added():
    assert _add(_ready(peers={"n1": OWN, "n2": "127.0.0.1:7002"})) == ADDED


def test_the_master_is_found_by_its_raft_address_whatever_the_node_calls_it():
    assert _add(_ready(peers={"db1": OWN})) == ADDED


@pytest.mark.parametrize(
    "peers",
    [{"n2": "127.0.0.1:7002"}, {}, {"n1": "localhost:7001"}],
    ids=["without-the-master", "none", "the-masters-id-at-another-address"],
)
def test_a_node_that_would_not_dial_the_master_is_refused_before_any_feeding(peers):
    with pytest.raises(MembershipChangeRefused) as refused:
        _add(_ready(peers=peers))
    assert refused.value.code == "master_not_a_peer"
    assert f"this master's Raft address ({OWN})" in refused.value.message
    assert f"among the peers it dials ({', '.join(f'{i} at {a}' for i, a in peers.items()) or 'none'}:" in (
        refused.value.message
    )


def test_a_node_of_a_version_that_names_no_peers_is_taken_at_its_word():
    assert _add(_ready()) == ADDED


def test_a_removal_whose_majority_needs_a_member_taking_a_snapshot_is_refused():
    """A member being shipped a snapshot answers nothing until it is in: counted as able to
    help, it let a removal through after which no write could commit until then."""
    third = Member("n3", NEW.raft, NEW.http)

    async def remove(raft):
        raise AssertionError("no removal")

    membership = Membership(
        require_master=lambda: None,
        members=lambda: (*MEMBERS, third),
        linked=lambda: {MEMBERS[1].raft, third.raft},
        shipping=lambda: {third.raft},
        own_raft=OWN,
        add=None,
        remove=remove,
        readiness=None,
    )
    with pytest.raises(MembershipChangeRefused) as refused:
        asyncio.run(membership.remove("n2"))
    assert refused.value.code == "would_lose_quorum"
    assert "n3 is being shipped a snapshot" in refused.value.message
