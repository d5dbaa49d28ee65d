"""The cluster's membership: which nodes vote, where each one's API is, and how it changes.

pysyncobj replicates the membership (``dynamicMembershipChange``): a change is a log entry
of its own, one node added or removed, which each node takes as its membership as soon as
the entry is in its log and drops again if the entry is cut (Raft's rule for single-server
changes: any majority of the old membership meets any majority of the new). Its leader
appends one only after an entry of its own term committed. Every snapshot holds the
membership at its index, so a node that restarts or installs one knows it. The node
objects it replicates are :class:`~horologe.cluster.raft.dial_node.DialNode`, which carry
each member's id and HTTP address.

What pysyncobj lacks, the shell adds (``RaftNode``, node.py):

* **One change at a time.** pysyncobj means to refuse a change while another is
  uncommitted but never records the index it checks against; the shell refuses it
  (``RaftNode._membership_settled``).
* **A new node catches up before it counts.** The leader first feeds it as a learner
  (pysyncobj's read-only nodes: sent the log, counted for nothing), by snapshot shipment
  when the log was compacted, and appends the change only once the learner holds the log
  up to the commit index it found when the catch-up began (:class:`Joining`). A 3-node
  cluster grown to 4 thus never waits for an empty node to make a majority.
* **From a fresh dump.** Holding the log is not having applied it: a learner fed from a
  dump taken up to ``log_compaction_min_entries`` (50,000) entries earlier, or fed the
  whole log of a cluster that never took one, applies every one of those entries after
  it was added, serving nothing meanwhile. So when the leader's last dump is more than
  :data:`JOIN_FRESH_DUMP_ENTRIES` behind its commit index, it takes one first and feeds
  the learner once it is written (the log cut there): the learner is shipped it and
  applies only what came after. A joiner that has applied the log up to an entry the
  leader's log still holds, of the same term there, no more than that behind (one
  restored from a recent backup), is fed the log from there instead.
* **A node outside the membership has no say.** A node started to join stands for no
  election until its log holds the change that adds it, nor does a removed one once its
  log holds its removal (the leader drops its link when it appends the change, so it may
  never learn of it: its connections are refused); vote requests from a node outside the
  membership are dropped.
* **A joiner's own elections are forgotten.** A node started once without ``join`` by
  mistake stands for election with the members as its peers, who refuse it, and its
  term climbs past theirs; started again to join, it would refuse every append of the
  master that feeds it (a lower term) and never catch up. A node started to join whose
  Raft files hold no entry a leader appended and no dump (:func:`only_own_elections`),
  and no vote but its own, has been no running cluster's member: its term and vote are
  its alone, and it starts at term 0, no vote. (A member of a cluster too young to have
  appended anything, started with ``join`` by mistake, could have voted for itself in its
  last term and for a peer in an earlier one; that election ended within an election
  timeout, long before a process restarts.)
* **The latest membership in the log, at start too.** pysyncobj takes a change at start
  only when it applies it (committed), over the dump's membership it loaded just before;
  the shell takes the changes in the log past the dump whenever a dump is loaded (the
  journal's, at the first tick of a node without one), and none at apply (an older
  change taken again after newer ones would undo them). A dump holds the membership as
  of its own index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .dial_node import DialNode


@dataclass(frozen=True)
class Member:
    node_id: str
    raft: str  # its Raft address: its identity
    http: str  # its HTTP address (host:port), as the other members reach it
    voter: bool = True  # False: a learner, fed the log before the change that adds it
    # A learner on the master: (the index it holds, the index it must hold to be added).
    catch_up: tuple[int, int] | None = None


JOIN_FRESH_DUMP_ENTRIES = 1_000  # a joiner is fed from a dump at most this far behind


def only_own_elections(term: int, entry_terms: Iterable[int], dumped: bool) -> bool:
    """Whether Raft files at ``term``, whose log's entries are of ``entry_terms``, with a
    dump or not, hold only what elections the node stood in alone left: a term, no entry
    of any leader (pysyncobj's first entry is of term 0), no dump."""
    return term > 0 and not dumped and all(t == 0 for t in entry_terms)


@dataclass
class Joining:
    """A node being added: fed as a learner until it holds the log up to ``target``, has
    applied it and a fresh reading of its clock was taken (for a few keep-alives at most:
    ``RaftNode._tick_membership``), then the change that adds it is proposed. Tick thread
    only.

    In rounds (the Raft thesis, 4.2.1): a round that took longer than an election timeout
    (a snapshot shipped for minutes while the cluster took writes) leaves the learner
    behind by what was committed meanwhile, and another round begins, to the commit index
    then; the change is proposed after a round that took no longer.

    Holding is not enough: a learner answers an append once the entries are on its disk,
    then applies them, all that is committed in one go, and answers nothing meanwhile. Added
    at once, with a member down (the new member needed for every majority), a learner fed
    500 entries held every commit of the cluster for 0.7-1.2 s while it applied them."""

    node: DialNode
    target: int  # the leader's commit index when this round of the catch-up began
    deadline: float  # monotonic s: give up catching up after this
    round_began: float  # monotonic s the round to ``target`` began
    done: Callable[[tuple[str, str] | None], None]  # None once committed, else (code, why not)
    proposed: bool = False
    fed: bool = False  # fed as a learner (after a fresh dump, when one was taken for it)
    dump_after: int = 0  # the leader's last dump when the catch-up began (0: none)
    # The index the learner last said it applied; None: its answers say nothing of it (a
    # node of an older version, in a rolling upgrade), so holding the log is enough.
    applied: int | None = 0
    ready_at: float = 0.0  # monotonic s it first held and applied the log (0: not yet)

    def heard_applied(self, applied: object) -> None:
        """The learner's answer said it applied ``applied`` (not an int: said nothing)."""
        self.applied = applied if isinstance(applied, int) and not isinstance(applied, bool) else None

    def applied_target(self) -> bool:
        """Whether the learner applied the log it must hold, as far as its answers say."""
        return self.applied is None or self.applied >= self.target

    def another_round(self, commit_index: int, now: float, round_s: float) -> bool:
        """The learner caught up with this round's target at ``now``: whether another round
        begins, to ``commit_index`` (this one took longer than ``round_s``, and more was
        committed since it began)."""
        if commit_index <= self.target or now - self.round_began <= round_s:
            return False
        self.target, self.round_began, self.ready_at = commit_index, now, 0.0
        return True


def needs_fresh_dump(dump_index: int, commit_index: int, applied: int = 0) -> bool:
    """Whether a joiner fed now would apply more than :data:`JOIN_FRESH_DUMP_ENTRIES`
    entries past the leader's last dump (0: none taken or loaded), or past ``applied``, an
    entry of the leader's log the joiner applied (a node restored from a backup of this
    history), when the leader's log still holds the entries after it."""
    start = applied if dump_index <= applied <= commit_index else dump_index
    return commit_index - start > JOIN_FRESH_DUMP_ENTRIES


def self_after(change: list, self_address: str, reverse: bool, was: bool) -> bool:
    """Whether this node is a voter after taking ``change`` (or undoing it, ``reverse``)."""
    kind, address = change[0], change[1]
    if address != self_address or kind not in ("add", "rem"):
        return was
    return (kind == "add") != reverse


def members_of(
    self_node: DialNode,
    voter: bool,
    others: Iterable[DialNode],
    learners: Iterable[tuple[DialNode, tuple[int, int]]],
    known: Callable[[str], tuple[str, str] | None],
) -> tuple[Member, ...]:
    """The membership as this node knows it, itself first, then by id; ``learners`` with
    their catch-up. ``known(address)`` names the (id, HTTP address) the settings give a
    node whose object carries none (one read from a snapshot written before nodes carried
    them)."""

    def member(node: DialNode, is_voter: bool, catch_up: tuple[int, int] | None = None) -> Member:
        node_id, http = getattr(node, "node_id", ""), getattr(node, "http", "")
        if not node_id:
            node_id, http = known(node.address) or (node.address, http)
        return Member(node_id, node.address, http, is_voter, catch_up)

    voters = set(others)
    rest = [member(n, True) for n in voters]
    rest += [member(n, False, catch_up) for n, catch_up in learners if n not in voters]
    return (member(self_node, voter), *sorted(rest, key=lambda m: m.node_id))
