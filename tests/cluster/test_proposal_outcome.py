"""What a request whose entries Raft did not all commit answers (cluster/raft/proposal_outcome.py)."""

from __future__ import annotations

import pytest

from horologe.cluster import (
    EntryDroppedError,
    NotMasterError,
    ProposalRejectedError,
    ProposalTimeoutError,
    all_committed,
)

DROPPED = EntryDroppedError("this node stopped leading before the entry was appended; nothing was done")


def test_every_entry_committed_gives_their_results():
    assert all_committed(["a", "b"]) == ["a", "b"]


def test_every_entry_dropped_is_nothing_done():
    with pytest.raises(EntryDroppedError):
        all_committed([DROPPED, EntryDroppedError("a new master committed another entry in its place")])


def test_a_drop_beside_a_committed_entry_is_not_nothing_done():
    """A produce split over two entries, one committed: a raw client told "nothing was done"
    (no_master) would send it again and store the committed part twice."""
    with pytest.raises(ProposalRejectedError, match="1 of the request's 2 entries committed") as e:
        all_committed(["a", DROPPED])
    assert not isinstance(e.value, EntryDroppedError)


def test_an_outcome_not_known_stays_as_it_was():
    timeout = ProposalTimeoutError("entry neither committed nor rejected in time")
    with pytest.raises(ProposalTimeoutError):
        all_committed([timeout, DROPPED])


def test_a_refusal_beside_a_committed_entry_is_not_nothing_done():
    """A release began between two parts of a produce: the second was refused before it
    was proposed (NotMasterError, 503 no_master: "nothing was done"), the first had
    committed, and a raw client sent it all again."""
    with pytest.raises(ProposalRejectedError, match="1 of the request's 2 entries committed"):
        all_committed(["a", NotMasterError(None)])
    with pytest.raises(NotMasterError):
        all_committed([NotMasterError(None), DROPPED])  # nothing of it done
