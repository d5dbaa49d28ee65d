"""`cluster add` and `cluster remove` after an answer that leaves a change unsure: 504
``not_committed`` (the master stopped leading with the change proposed: it may still be
made) and the answers that say it was not made (``lost_lead``, a change under way). As
docs/api.md says, the members are listed and the change asked again only if they lack it;
the command printed the 504 and left that to the operator."""

from __future__ import annotations

import pytest

from horologe.cli import cluster
from horologe.client import HorologeError, membership_change


class _Client:
    """A membership, and for each ask of a change the next of ``answers``: ``made``,
    ``made+<code>`` (made, then answered with that error code) or ``<code>`` (not made)."""

    def __init__(self, answers: list[str]) -> None:
        self.ids = {"n1", "n2", "n3"}
        self.answers = answers
        self.asks: list[str] = []
        self.listings: list[dict] = []

    def _answer(self, change) -> list[dict]:
        answer = self.answers.pop(0)
        if answer.startswith("made"):
            change()
            answer = answer.removeprefix("made").removeprefix("+")
        if answer:
            raise HorologeError(f"HTTP 504: {answer}: why", 504, answer)
        return self.members()

    def remove_member(self, node_id: str) -> list[dict]:
        self.asks.append(f"remove {node_id}")
        return self._answer(lambda: self.ids.discard(node_id))

    def add_member(self, node_id: str, *_args) -> list[dict]:
        self.asks.append(f"add {node_id}")
        return self._answer(lambda: self.ids.add(node_id))

    def members(self) -> list[dict]:
        return self.membership()["members"]

    def membership(self) -> dict:
        if self.listings:  # what a node lists for a moment, before its log settles
            return self.listings.pop(0)
        return {"members": [{"node_id": n} for n in sorted(self.ids)], "settled": True}


def _listing(ids: list[str], settled: bool = True, learner: str | None = None) -> dict:
    members = [{"node_id": n, **({"voter": False} if n == learner else {})} for n in ids]
    return {"members": members, "settled": settled}


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch):
    monkeypatch.setattr(membership_change, "PAUSE_S", 0.0)


@pytest.mark.parametrize(
    ("answers", "asks"),
    [
        (["made+not_committed"], 1),  # made: not asked again
        (["not_committed", "made"], 2),  # not made: asked again
        (["lost_lead", "change_under_way", "made"], 3),
    ],
)
def test_a_removal_left_unsure_is_asked_again_only_if_the_members_lack_it(answers, asks, capsys):
    client = _Client(answers)
    assert cluster._remove(client, "n2") == [{"node_id": "n1"}, {"node_id": "n3"}]
    assert client.asks == ["remove n2"] * asks
    assert "listing the members before asking again" in capsys.readouterr().err


@pytest.mark.parametrize("said", ["unknown_node", "not_a_member"])
def test_a_removal_an_earlier_ask_made_ends_when_the_master_says_so(said):
    """The members are listed by the node at --url, whose log may not have the change yet;
    asked again, the master answers that it is made: ``unknown_node`` (no such member in
    the state it applied; the command exited 1 for a removal made) or, from its Raft
    layer, ``not_a_member``."""
    client = _Client(["made+not_committed", said])
    client.listings = [_listing(["n1", "n2", "n3"])]  # lagging
    assert cluster._remove(client, "n2") == [{"node_id": "n1"}, {"node_id": "n3"}]
    assert client.asks == ["remove n2"] * 2


def test_an_addition_left_unsure_is_not_asked_again_once_the_members_have_it():
    client = _Client(["made+not_committed"])
    members = cluster._until_made(client, "n4", lambda: client.add_member("n4"), member_after=True)
    assert {m["node_id"] for m in members} == {"n1", "n2", "n3", "n4"}
    assert client.asks == ["add n4"]


def test_a_refusal_of_the_ask_itself_is_not_asked_again():
    client = _Client(["would_lose_quorum"])
    with pytest.raises(HorologeError, match="would_lose_quorum"):
        cluster._remove(client, "n2")
    assert client.asks == ["remove n2"]


def test_a_change_never_made_ends_with_an_error_after_a_few_asks():
    client = _Client(["not_committed"] * 5)
    with pytest.raises(HorologeError, match="not made in 5 asks"):
        cluster._remove(client, "n2")
    assert len(client.asks) == 5


def test_an_add_listed_uncommitted_or_as_a_learner_is_not_taken_as_made(capsys):
    """The node answering the listing may hold the add uncommitted, which a new master may
    cut (``settled`` false), or list the node as a learner the master still feeds: the
    command printed that the add was made, and the operator went on to remove a machine."""
    client = _Client(["lost_lead", "not_committed", "made"])
    client.listings = [
        _listing(["n1", "n2", "n3", "n4"], settled=False),  # the add in its log, uncommitted
        _listing(["n1", "n2", "n3"]),  # then cut
        _listing(["n1", "n2", "n3", "n4"], learner="n4"),  # fed, not added
    ]
    members = cluster._until_made(client, "n4", lambda: client.add_member("n4"), member_after=True)
    assert client.asks == ["add n4"] * 3
    assert [m["node_id"] for m in members] == ["n1", "n2", "n3", "n4"]


def test_an_add_answered_member_exists_while_the_node_is_still_fed_is_not_taken_as_made(capsys):
    """Asked again after a 504, an add of a node the master still feeds as a learner is
    answered member_exists: made, the command said, though the node did not vote yet."""
    client = _Client(["not_committed", "member_exists", "made+member_exists"])
    client.listings = [_listing(["n1", "n2", "n3", "n4"], learner="n4")] * 2
    members = cluster._until_made(client, "n4", lambda: client.add_member("n4"), member_after=True)
    assert client.asks == ["add n4"] * 3
    assert [m["node_id"] for m in members] == ["n1", "n2", "n3", "n4"]
