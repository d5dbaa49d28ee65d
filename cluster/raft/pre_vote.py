"""Raft's pre-vote (Ongaro's thesis, §9.6): a node asks its members whether they would
vote for it before it stands for election, and neither side changes its term for it.

Without it, a follower that alone stops hearing the master (its link from the master
down, or not yet up after it restarts) stands at its election timeout in a later term.
Its members refuse it their votes while they hear the master, but they take its term, as
Raft has them; the master, answered in a later term, steps down, and the cluster elects
again for nothing. With it, the follower stands only once a majority would vote for it:
none does while a majority hears the master, so the master keeps its term.

A node that asks names no leader from its first ask until it hears an append of one again
(``RaftNode._ask_pre_vote``): it has not heard its leader for an election timeout, and says
so in its readiness and status rather than naming a master it cannot hear.

The messages, on the Raft link beside pysyncobj's own (it ignores types it does not know):

- ``{"type": "pre_vote", "term": T, "last_log_index": i, "last_log_term": t}``: would you
  vote for me in term ``T`` (the asker's term + 1), my log ending at ``(t, i)``?
- ``{"type": "pre_vote_answer", "term": T, "granted": bool}``.

A member grants it when Raft would grant a vote in that term: ``T`` is not behind its own
term and the asker's log is at least as up to date as its own; and when it would not
withhold the vote for a lease (it heard its leader within the election timeout, or it
leads and its lease holds: ``RaftNode._withholds_vote``).

Versions without the pre-vote answer none. Their keep-alives lack the ``pre_vote`` flag
this version's carry, and a member seen so counts as granting: that node decides at the
vote itself, as before.

**A term ahead.** A node may hold a later term than its leader's: it won a pre-vote while
cut off, stood, and none of its vote requests reached the members, who then elected a
leader in an earlier term. Its pre-votes are refused from then on (the members hear
their leader), so it no longer stands to carry its term to them, and pysyncobj drops
the leader's appends of the earlier term unanswered: it would never follow again. So a
node answers an append of an earlier term with

- ``{"type": "later_term", "term": T}``, its own term;

and a node told so by a member takes ``T`` and steps down if it leads, as Raft has it
for any answer of a later term (``RaftNode._take_later_term``). The members then elect
in a later term, which the node follows. etcd's raft answers such appends for the same
reason when the pre-vote is on. A version without it ignores the message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PRE_VOTE = "pre_vote"
PRE_VOTE_ANSWER = "pre_vote_answer"
LATER_TERM = "later_term"


def would_vote(term: int, current_term: int, asker_log: tuple[int, int], own_log: tuple[int, int]) -> bool:
    """Whether Raft's vote rule grants a candidate in ``term`` whose log ends at
    ``asker_log`` (last term, last index), to a node in ``current_term`` whose log ends at
    ``own_log``: a term not behind, a log at least as up to date (§5.4.1)."""
    return term >= current_term and asker_log >= own_log


@dataclass
class Round:
    """One pre-vote: the term it asks about, when it began (s, by the asker's clock of
    the time it ran through: awake_clock.py), the members asked, and those that granted
    it (or know no pre-vote)."""

    term: int
    began: float
    members: frozenset[str]
    granted: set[str] = field(default_factory=set)

    def grant(self, address: str) -> None:
        if address in self.members:
            self.granted.add(address)

    def won(self) -> bool:
        """A majority of the membership, the asker included, would vote for it."""
        return 2 * (1 + len(self.granted)) > len(self.members) + 1
