"""A change of the membership asked until it is made, as docs/api.md says to.

An add or a removal may be answered 504 ``not_committed``: the master stopped leading with
the change proposed, and it may still be made. Other answers say it was not made, with
nothing wrong in the ask: ``lost_lead``, or another change still under way. A client must
not send the change again blindly: it lists the members, and asks again only if they lack
the change. A listing that holds a change not yet committed (``settled`` false) may still
go back, as may one naming the node as a learner being fed (``voter`` false): it is
listed again until settled, and an added node counts only as a voter. A change asked
again that an earlier ask made is answered ``member_exists``, or ``unknown_node`` (or
``not_a_member``, from the master's Raft layer); the members are listed then too, since a
learner still fed is a member that exists.
``horologe cluster add/remove`` and the chaos scenarios ask so.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .errors import HorologeError
from .sync_client import Client

# Answers after which the change may have been made all the same, or was not made.
NOT_SURE = frozenset({"not_committed", "lost_lead", "change_under_way", "change_refused"})
ASKS = 5  # asks of one change at most
PAUSE_S = 1.0  # after an answer in NOT_SURE, before the members are listed
SETTLE_S = 30.0  # how long a listing with a change uncommitted is listed again, at most


def change_until_made(
    client: Client,
    node_id: str,
    ask: Callable[[], list[dict]],
    member_after: bool,
    said: Callable[[str], None] = lambda _text: None,
) -> list[dict]:
    """``ask()`` for a change of ``node_id``'s membership (whether it is a member after it:
    ``member_after``) until it answers with the members after it, or ``client``'s members
    show it made, at most :data:`ASKS` times; the members then. After an answer in
    :data:`NOT_SURE`: ``said(why)``, a pause of :data:`PAUSE_S` (an election may end
    meanwhile), then the members are listed. Any other error is raised; so is a change
    not made after :data:`ASKS` asks."""
    already = {"member_exists"} if member_after else {"unknown_node", "not_a_member"}
    for k in range(ASKS):
        try:
            return ask()
        except HorologeError as e:
            # Asked again: an add is answered member_exists for a learner still fed too.
            if not (k and e.code in already) and e.code not in NOT_SURE:
                raise
            said(f"{e}: listing the members before asking again")
        time.sleep(PAUSE_S)
        members = _settled_members(client)
        if members is not None and made(members, node_id) == member_after:
            return members
    raise HorologeError(f"{node_id}: the change was not made in {ASKS} asks")


def made(members: list[dict], node_id: str) -> bool:
    """Whether ``node_id`` votes among ``members`` (a learner being fed does not yet)."""
    return any(m["node_id"] == node_id and m.get("voter", True) for m in members)


def _settled_members(client: Client) -> list[dict] | None:
    """The members once the listing holds no change uncommitted (a node of a version that
    does not say is taken at its word); None if it still does after :data:`SETTLE_S`."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        listing = client.membership()
        if listing.get("settled", True):
            return listing["members"]
        if time.monotonic() >= deadline:
            return None
        time.sleep(PAUSE_S)
