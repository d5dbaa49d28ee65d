"""What a proposal pysyncobj did not commit tells its proposer: whether anything was done."""

from __future__ import annotations

from pysyncobj import FAIL_REASON

from ..errors import EntryDroppedError, NotMasterError, ProposalRejectedError

# What an entry failed with when nothing of it was done for certain: dropped, or refused
# before it was proposed (a release under way, the role gone).
NOTHING_DONE = (EntryDroppedError, NotMasterError)

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


def all_committed(outcomes: list) -> list:
    """The results of a request's entries, as ``asyncio.gather(..., return_exceptions=True)``
    gives them, when every one committed. When none did and nothing of each was done for
    certain (:data:`NOTHING_DONE`), the first error (nothing was done). Otherwise the
    first error, as a :class:`ProposalRejectedError` if it was such: other entries of the
    request may have committed, so a resend is not "nothing done"."""
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    if not errors:
        return outcomes
    first = errors[0]
    nothing_done = len(errors) == len(outcomes) and all(isinstance(e, NOTHING_DONE) for e in errors)
    if nothing_done or not isinstance(first, NOTHING_DONE):
        raise first
    raise ProposalRejectedError(
        f"{len(outcomes) - len(errors)} of the request's {len(outcomes)} entries committed, "
        f"the rest not ({first}): only part of it was done"
    ) from first
