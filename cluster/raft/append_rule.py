"""Raft's append rule, which pysyncobj gets wrong: cut a follower's log only on a conflict.

pysyncobj's follower deletes every entry after ``prevLogIdx`` on each ``append_entries``
message, heartbeats included, before adding the message's entries. A leader whose view
of the follower is behind (a reply overtaken by the next send, a resend after a timeout)
then makes the follower drop entries it already holds, committed and applied ones among
them ("truncating already-applied log entries", seen under plain load). Until the
leader sends them again, those entries are missing from a log that counted for their
majority: should the leader die then, an acknowledged entry can be lost.

Raft's rule (§5.3) is to delete only from the first entry that conflicts (same index,
another term). :func:`trim_append` rewrites a message so that pysyncobj's handler does
just that: it drops the message's entries the follower already holds with the same
term, and moves ``prevLogIdx`` past entries of its own that the leader's log is known to
hold. An entry of the follower is known to be in the leader's log when it is committed
(at most the follower's commit index) or when it, or any later entry of the follower's,
carries the message's term (one leader per term, a leader never rewrites its own entries,
and an entry appended after a log check brings the whole log before it). Pure: the log is
read through ``term_at``.
"""

from __future__ import annotations

from collections.abc import Callable


def trim_append(message: dict, term_at: Callable[[int], int | None], last_idx: int, commit_idx: int) -> dict:
    """``message`` (an ``append_entries`` with ``prevLogIdx``) as pysyncobj should see it.

    ``term_at(idx)`` is the term of this follower's entry ``idx`` (None if it has none),
    ``last_idx`` its last index, ``commit_idx`` its commit index. Returns ``message``
    itself when nothing needs to change, else a copy.
    """
    prev = message["prevLogIdx"]
    if term_at(prev) != message["prevLogTerm"]:
        return message  # pysyncobj answers a mismatch itself
    entries = list(message.get("entries", ()))
    matched = 0
    while matched < len(entries) and term_at(entries[matched][1]) == entries[matched][2]:
        matched += 1
    if matched:
        prev, prev_term = entries[matched - 1][1], entries[matched - 1][2]
        entries = entries[matched:]
    else:
        prev_term = message["prevLogTerm"]
    if entries:
        if matched == 0:
            return message  # the first entry is new or conflicts: pysyncobj's cut is right
        return {**message, "prevLogIdx": prev, "prevLogTerm": prev_term, "entries": entries}
    # Nothing new: keep every following entry the leader's log is known to hold: up to
    # the commit index, and up to the follower's last entry of the message's term (it came
    # from this term's leader after a log check, so by Log Matching it and every entry
    # before it are the leader's), older-term entries between them included.
    known = max(prev, min(commit_idx, last_idx), _last_of_term(term_at, last_idx, prev, message["term"]))
    if known == message["prevLogIdx"] and not matched:
        return message
    if known > prev:
        prev, prev_term = known, term_at(known)
    return {**message, "prevLogIdx": prev, "prevLogTerm": prev_term, "entries": []}


def _last_of_term(term_at: Callable[[int], int | None], last_idx: int, floor: int, term: int) -> int:
    """The follower's last entry of ``term`` above ``floor``, else ``floor``. A log's terms
    never decrease, so the search stops at the first older term from the end."""
    idx = last_idx
    while idx > floor:
        held = term_at(idx)
        if held == term:
            return idx
        if held is None or held < term:
            break
        idx -= 1
    return floor
