"""What a proposal pysyncobj did not commit tells its proposer: whether anything was done."""

from __future__ import annotations

from pysyncobj import FAIL_REASON

from ..errors import EntryDroppedError, ProposalRejectedError

# Why pysyncobj dropped a proposal for certain (EntryDroppedError), by its FAIL_REASON.
DROPPED = {
    FAIL_REASON.NOT_LEADER: "this node stopped leading before the entry was appended",
    FAIL_REASON.MISSING_LEADER: "no master was known when the entry was proposed",
    FAIL_REASON.REQUEST_DENIED: "the entry was denied (this master is deposed or halted)",
    FAIL_REASON.DISCARDED: "a new master committed another entry in its place",
}


def not_committed(reason: int) -> ProposalRejectedError:
    """The error for a proposal pysyncobj answered with ``reason`` (not SUCCESS)."""
    if reason in DROPPED:
        return EntryDroppedError(f"{DROPPED[reason]}; nothing was done")
    if reason == FAIL_REASON.QUEUE_FULL:
        return ProposalRejectedError("the master's proposal queue is full; nothing was done")
    return ProposalRejectedError(f"the master changed before the entry was known to commit (reason {reason})")
