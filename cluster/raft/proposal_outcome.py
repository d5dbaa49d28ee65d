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


def all_committed(outcomes: list) -> list:
    """The results of a request's entries, as ``asyncio.gather(..., return_exceptions=True)``
    gives them, when every one committed. When none did and each was dropped for certain,
    the first :class:`EntryDroppedError` (nothing was done). Otherwise the first error, as
    a :class:`ProposalRejectedError` if it was a drop: other entries of the request may
    have committed, so a resend is not "nothing done"."""
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    if not errors:
        return outcomes
    first = errors[0]
    every_one_dropped = len(errors) == len(outcomes) and all(isinstance(e, EntryDroppedError) for e in errors)
    if every_one_dropped or not isinstance(first, EntryDroppedError):
        raise first
    raise ProposalRejectedError(
        f"{len(outcomes) - len(errors)} of the request's {len(outcomes)} entries committed, "
        f"the rest not ({first}): only part of it was done"
    ) from first
