"""Changes of the cluster's membership, as an operator asks for them (``horologe cluster``,
``/admin/cluster/members``): checks in the domain's terms, then the Raft shell's change
(cluster/raft/membership.py says how a change is made safe). Loop thread only.

Adding a node: the node is started first, to join (``join = true``, with the members
it should dial as its peers); the master feeds it the log (a snapshot shipment when the
log was compacted) and commits the change that adds it once it caught up. Removing one
commits the change that removes it; the master itself is released first (a leader
cannot count itself out). Replacing a machine is an add, then a remove.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from horologe.cluster.errors import MembershipChangeError
from horologe.cluster.raft.membership import Member

from .errors import MemberExists, MembershipChangeFailed, MembershipChangeRefused, UnknownNode

DEFAULT_CATCH_UP_S = 600.0  # a new node's catch-up: a snapshot of the whole store, shipped
COMMIT_S = 30.0  # for the change itself to commit once proposed (beyond a catch-up)
REFUSED = {"change_under_way", "change_refused"}
EXISTS = {"member_exists"}


class Membership:
    def __init__(
        self,
        *,
        require_master: Callable[[], None],
        members: Callable[[], tuple[Member, ...]],
        linked: Callable[[], set[str]],
        shipping: Callable[[], set[str]] = frozenset,
        settled: Callable[[], bool] = lambda: True,
        own_raft: str,
        add: Callable[[Member, float, tuple[int, int] | None], Awaitable[None]],
        remove: Callable[[str], Awaitable[None]],
        readiness: Callable[[str], Awaitable[dict | None]],
    ) -> None:
        """``members()`` as this node's log has them, itself first; ``linked()`` the Raft
        addresses of the nodes it has a live Raft link to; ``add(member, catch_up_s)`` and
        ``remove(raft address)`` the Raft shell's changes, on the master (``add`` also
        takes the (index, term) the node says it applied, from which it may be fed the log);
        ``readiness(http address)`` what a node's ``/readyz`` says (None: no answer);
        ``settled()`` whether no change of ``members()`` is in the log uncommitted;
        ``shipping()`` the Raft addresses of the members this master ships a snapshot to."""
        self._require_master = require_master
        self._members = members
        self._settled = settled
        self._linked = linked
        self._shipping = shipping
        self._own_raft = own_raft
        self._add = add
        self._remove = remove
        self._readiness = readiness

    def listing(self) -> dict:
        """The members, this node first: id, addresses, whether it votes (a learner being
        fed does not yet) and whether this node has a live Raft link to it."""
        linked = self._linked()
        return {
            "members": [
                {
                    "node_id": m.node_id,
                    "raft": m.raft,
                    "http": m.http,
                    "voter": m.voter,
                    "self": m.raft == self._own_raft,
                    "linked": m.raft == self._own_raft or m.raft in linked,
                    **(
                        {}
                        if m.catch_up is None
                        else {"catch_up": {"held": m.catch_up[0], "target": m.catch_up[1]}}
                    ),
                }
                for m in self._members()
            ],
            "settled": self._settled(),
        }

    async def add(self, node_id: str, raft: str, http: str, catch_up_s: float = DEFAULT_CATCH_UP_S) -> dict:
        """Feed the node at ``raft`` until it caught up, then commit it as a member."""
        self._require_master()
        for m in self._members():
            for field, mine, theirs in (
                ("node_id", node_id, m.node_id),
                ("raft", raft, m.raft),
                ("http", http, m.http),
            ):
                if mine == theirs:
                    raise MemberExists(f"{m.node_id} is a member with {field} {mine!r} already", field)
        ready = await self._readiness(http)
        if ready is None:
            raise MembershipChangeRefused(
                f"nothing answered at {http}/readyz: start {node_id} first, to join "
                "(join = true, or horologe node --join), with the members as its peers",
                "not_reachable",
                "http",
            )
        # A node of a version that does not say these is taken at its word, as before.
        if ready.get("node_id", node_id) != node_id:
            raise MembershipChangeRefused(
                f"the node at {http} is {ready['node_id']}, not {node_id}: add it under its own "
                "node_id (the members would know it by another name than it knows itself)",
                "wrong_node",
                "node_id",
            )
        if ready.get("raft", raft) != raft:
            raise MembershipChangeRefused(
                f"the node at {http} has raft = {ready['raft']!r} in its config, not {raft!r}: "
                "add it at the Raft address it knows itself by (the members and it would not "
                "recognise each other)",
                "wrong_raft",
                "raft",
            )
        if ready.get("join", True) is False:
            raise MembershipChangeRefused(
                f"{node_id} at {http} was not started to join: it stands for election among peers "
                "that refuse it and takes no log. Restart it with join = true (horologe node --join)",
                "not_joining",
                "http",
            )
        peers = ready.get("peers")
        if isinstance(peers, dict) and self._own_raft not in peers.values():
            # It dials only its peers and hangs up on any other node that calls (pysyncobj
            # knows a node by its Raft address): this master could not feed it, and the add
            # would fail once catch_up_s ran out.
            dials = ", ".join(f"{i} at {a}" for i, a in sorted(peers.items())) or "none"
            raise MembershipChangeRefused(
                f"{node_id} at {http} does not have this master's Raft address ({self._own_raft}) among "
                f"the peers it dials ({dials}: its [peers.*], or the membership the log in its data "
                "folder holds): the two would never link, and it would take no log. Start it again with "
                "the current members as its peers (horologe cluster members lists them), on an emptied "
                "or restored data folder if that log holds an older membership",
                "master_not_a_peer",
                "http",
            )
        index, term = ready.get("applied_index"), ready.get("applied_term")
        applied = (index, term) if type(index) is int and type(term) is int else None
        await self._change(self._add(Member(node_id, raft, http), catch_up_s, applied), catch_up_s + COMMIT_S)
        return self.listing()

    async def remove(self, node_id: str) -> dict:
        """Commit the change that removes member ``node_id`` (not the master itself)."""
        self._require_master()
        member = next((m for m in self._members() if m.node_id == node_id and m.voter), None)
        if member is None:
            known = ", ".join(m.node_id for m in self._members() if m.voter)
            raise UnknownNode(f"no member named {node_id!r} (members: {known})", "node_id")
        if member.raft == self._own_raft:
            raise MembershipChangeRefused(
                f"{node_id} is the master: release it first (horologe release-master), then remove it "
                "on the new master (horologe cluster remove does both)",
                "is_master",
                "node_id",
            )
        rest = [m for m in self._members() if m.voter and m.raft != member.raft]
        # One being shipped a snapshot answers nothing until it is in.
        linked, taking = self._linked(), self._shipping()
        shipping = [m for m in rest if m.raft in taking]
        heard = [m for m in rest if m.raft == self._own_raft or (m.raft in linked and m not in shipping)]
        if len(heard) < len(rest) // 2 + 1:
            why = "".join(f"; {m.node_id} is being shipped a snapshot" for m in shipping)
            raise MembershipChangeRefused(
                f"without {node_id}, the members this master is linked to and that are caught up "
                f"({', '.join(m.node_id for m in heard)}) are no majority of the {len(rest)} left{why}: "
                "the cluster would stop. Bring a member back first, or wait for the snapshot to be in",
                "would_lose_quorum",
                "node_id",
            )
        await self._change(self._remove(member.raft), COMMIT_S)
        return self.listing()

    @staticmethod
    async def _change(change: Awaitable[None], timeout_s: float) -> None:
        try:
            async with asyncio.timeout(timeout_s):  # not wait_for: it can drop a cancel
                await change
        except TimeoutError as e:
            raise MembershipChangeFailed(
                f"no answer within {timeout_s:g} s: the change may still be made (look at the members)",
                "not_committed",
            ) from e
        except MembershipChangeError as e:
            if e.code == "not_master":
                raise MembershipChangeFailed(e.message, "lost_lead") from e
            if e.code in EXISTS:
                raise MemberExists(e.message) from e
            if e.code in REFUSED:
                raise MembershipChangeRefused(e.message, e.code) from e
            raise MembershipChangeFailed(e.message, e.code) from e
