"""The rules the Raft shell adds to pysyncobj's membership changes (cluster/raft/membership.py),
on nodes ticked by hand: one change at a time, no say for a node outside the membership, no
election from a node started to join, and the membership of the log's tail taken at start."""

from __future__ import annotations

import time

from pysyncobj import FAIL_REASON

from horologe.cluster.raft import node as raft_node
from horologe.cluster.raft.dial_node import DialNode
from horologe.cluster.raft.membership import JOIN_FRESH_DUMP_ENTRIES, Member
from horologe.cluster.raft.node import CLOCK_WAIT_KEEPALIVES, KEEPALIVE

from .ticked import commit_alone, crash, lead_alone, stand, tick, ticked_node


def _node(address: str, node_id: str) -> DialNode:
    return DialNode(address, None, node_id, "127.0.0.1:9")


def test_a_second_change_waits_until_the_first_is_committed(tmp_path):
    """pysyncobj means to refuse it but never records the index it checks against: both
    changes would be in the log uncommitted, and two changes in flight can make two
    majorities that do not meet."""
    node = ticked_node(tmp_path)
    try:
        lead_alone(node)
        answers: list = []
        # Alone, the first change makes a cluster of two: it cannot commit without the new node.
        node.addNodeToCluster(_node("127.0.0.1:1", "x"), callback=lambda _r, e: answers.append(("x", e)))
        node.addNodeToCluster(_node("127.0.0.1:2", "y"), callback=lambda _r, e: answers.append(("y", e)))
        tick(node)
        assert answers == [("y", FAIL_REASON.REQUEST_DENIED)]
        assert {n.address for n in node.otherNodes} == {"127.0.0.1:1"}
    finally:
        crash(node)


def test_the_status_says_whether_the_membership_it_lists_may_still_go_back(tmp_path):
    """A change in the log uncommitted may be cut by a new master, and the membership with
    it: a client that listed it and took the change as made told an operator so wrongly
    (horologe/client/membership_change.py)."""
    node = ticked_node(tmp_path)
    try:
        lead_alone(node)
        assert node._status_now().members_settled
        node.addNodeToCluster(_node("127.0.0.1:1", "x"), callback=lambda _r, _e: None)
        tick(node)  # alone, the change makes a cluster of two: it cannot commit without x
        status = node._status_now()
        assert {m.node_id for m in status.members} == {"n0", "x"} and not status.members_settled
    finally:
        crash(node)


class _Log:
    """What ``RaftNode._membership_settled`` reads of a node: its log as (command, index,
    term) entries from index 1 (b"c": a change of the membership) and its commit index."""

    def __init__(self) -> None:
        self.entries: list[tuple[bytes, int, int]] = []
        self.raftCommitIndex = 0
        self._changes_seen, self._last_change = (0, None), 0

    def put(self, index: int, term: int, command: bytes = b"x") -> None:
        del self.entries[index - 1 :]  # a leader's append replaces what follows
        self.entries.append((command, index, term))

    def last_log_index(self) -> int:
        return len(self.entries)

    def entry_term(self, index: int) -> int | None:
        return self.entries[index - 1][2] if 0 < index <= len(self.entries) else None

    def _get_entries(self, first: int):
        return self.entries[first - 1 :]

    def membership_change_of(self, command: bytes):
        return ["add", "x"] if command == b"c" else None

    def settled(self) -> bool:
        return raft_node.RaftNode._membership_settled(self)


def test_a_change_cut_or_replaced_by_a_leaders_appends_is_seen_gone():
    """Each tick looks only at what was appended since the last; a log whose entry last
    looked at changed is looked at again above the commit index."""
    log = _Log()
    log.put(1, 1)
    assert log.settled()
    log.put(2, 1, b"c")
    assert not log.settled()  # uncommitted
    log.put(2, 2)  # a new leader's entry in its place, no change
    assert log.settled()
    log.put(2, 2, b"x")
    log.put(3, 2)
    assert log.settled()
    log.entries[1:] = [(b"c", 2, 3), (b"x", 3, 3)]  # replaced at the same length: a change at 2
    assert not log.settled()
    log.raftCommitIndex = 2
    assert log.settled()
    del log.entries[2:]
    log.put(3, 4, b"c")
    assert not log.settled()
    del log.entries[2:]  # cut
    assert log.settled()


def test_a_candidate_outside_the_membership_is_not_heard(tmp_path):
    node = ticked_node(tmp_path, peers=("127.0.0.1:7",))
    try:
        stranger = _node("127.0.0.1:8", "s")
        vote = {"type": "request_vote", "term": 9, "last_log_index": 100, "last_log_term": 9}
        node._on_message(stranger, vote)
        assert node.raftCurrentTerm == 0  # its term not taken: a removed node deposes no one
        member = next(iter(node.otherNodes))
        node._on_message(member, vote)
        assert node.raftCurrentTerm == 9
    finally:
        crash(node)


def test_a_node_started_to_join_stands_for_no_election(tmp_path):
    node = ticked_node(tmp_path, join=True)
    try:
        deadline = time.monotonic() + 3 * node.settings.raft_max_timeout
        while time.monotonic() < deadline:
            tick(node)
            time.sleep(0.01)
        assert not node.is_master() and node.raftCurrentTerm == 0
        (me,) = node._members()
        assert me == Member("n0", node.settings.raft, "", voter=False)
    finally:
        crash(node)


def _crash_with_an_add_uncommitted(tmp_path) -> int:
    """A node of ``tmp_path`` that led alone, crashed with the addition of ``x`` in its log
    and not committed; its term."""
    node = ticked_node(tmp_path)
    lead_alone(node)
    node.addNodeToCluster(_node("127.0.0.1:1", "x"), callback=lambda _r, _e: None)
    tick(node)
    assert node.raftCommitIndex < node.last_log_index()  # the change is in the log, uncommitted
    term = node.raftCurrentTerm
    crash(node)
    return term


def test_a_restart_takes_the_changes_in_its_logs_tail_at_once(tmp_path):
    """pysyncobj takes a change at start only once it applies it (committed); Raft has a
    node use the latest membership in its log."""
    _crash_with_an_add_uncommitted(tmp_path)
    again = ticked_node(tmp_path)
    try:
        tick(again)  # no dump to load: the tail is taken at the first tick
        assert {(m.node_id, m.voter) for m in again._members()} == {("n0", True), ("x", True)}
    finally:
        crash(again)


def test_a_restart_from_a_dump_takes_the_changes_after_it(tmp_path):
    """pysyncobj loads the dump at the first tick and makes its members the node's; the
    changes in the log after it must be taken over them (the first tick's load came after
    anything the constructor took)."""
    node = ticked_node(tmp_path, log_compaction_min_entries=4)
    lead_alone(node)
    commit_alone(node, 1_000, 6)
    node.forceLogCompaction()
    for _ in range(5):
        tick(node)
    assert node._dump.last is not None, "a dump was written"
    node.addNodeToCluster(_node("127.0.0.1:1", "x"), callback=lambda _r, _e: None)
    tick(node)
    assert node.raftCommitIndex < node.last_log_index()  # the change is after the dump, uncommitted
    crash(node)
    again = ticked_node(tmp_path, log_compaction_min_entries=4)
    try:
        tick(again)  # loads the dump
        assert {(m.node_id, m.voter) for m in again._members()} == {("n0", True), ("x", True)}
    finally:
        crash(again)


def test_a_node_started_alone_whose_log_has_members_takes_no_lead_at_its_first_tick(tmp_path):
    """A node configured alone (the first of a cluster grown by adds) whose start took
    longer than an election timeout: its first tick must decide whether to stand by the
    membership of its log, not the configured one. By the configured one it is alone: it
    would stand at once, and lead a membership of two with no vote of the other's."""
    term = _crash_with_an_add_uncommitted(tmp_path)
    again = ticked_node(tmp_path)
    try:
        again.election_deadline = 0  # passed before the first tick
        tick(again, 2)
        assert not again.is_master() and again.raftCurrentTerm == term
        assert {m.node_id for m in again._members()} == {"n0", "x"}
    finally:
        crash(again)


def test_a_dump_holds_the_membership_at_its_index(tmp_path):
    """A change past the dump's index may yet be cut: the dump holds the members as of its
    own index (pysyncobj writes those of now), and the change comes from the log."""
    node = ticked_node(tmp_path, log_compaction_min_entries=4)
    try:
        lead_alone(node)
        commit_alone(node, 1_000, 6)
        node.addNodeToCluster(_node("127.0.0.1:1", "x"), callback=lambda _r, _e: None)
        tick(node)
        assert {n.address for n in node.otherNodes} == {"127.0.0.1:1"}  # taken, uncommitted
        node.forceLogCompaction()
        for _ in range(5):
            tick(node)
        dump = node._dump.current()
        assert dump is not None and dump.index < node.last_log_index()
        assert {n.address for n in dump.raft_data[2]} == {node.settings.raft}
    finally:
        crash(node)


def test_a_restart_without_a_dump_keeps_a_committed_change(tmp_path):
    """Without a dump, the first tick applies the committed entries before the shell takes
    the log's changes (none is taken at apply): they are taken from the journal's start."""
    node = ticked_node(tmp_path)
    x = _node("127.0.0.1:1", "x")
    lead_alone(node)
    answers: list = []
    node.addNodeToCluster(x, callback=lambda _r, e: answers.append(e))
    tick(node)
    ack = {"type": "next_node_idx", "next_node_idx": node.last_log_index() + 1, "reset": False}
    node._on_message(x, {**ack, "success": True, "term": node.raftCurrentTerm})  # x holds it all
    for _ in range(5):
        tick(node)
    assert answers == [FAIL_REASON.SUCCESS]  # committed and applied
    node._journal.onOneSecondTimer()  # the commit index saved, as a running node does each second
    crash(node)
    again = ticked_node(tmp_path)
    try:
        tick(again)
        assert {(m.node_id, m.voter) for m in again._members()} == {("n0", True), ("x", True)}
    finally:
        crash(again)


def test_a_term_from_elections_stood_in_alone_is_dropped_when_the_node_starts_to_join(tmp_path, caplog):
    """A node started without ``join`` by mistake, whose term climbed on elections it stood
    in alone (as a node without the pre-vote did: members drop an outsider's asks now),
    starts to join at term 0: at its own term it would refuse the appends of the master
    that feeds it, of a lower term, and its add would never catch up."""
    peers = ("127.0.0.1:1", "127.0.0.1:2")
    node = ticked_node(tmp_path, peers=peers)
    node.connected_nodes |= node.otherNodes
    for _ in range(3):
        stand(node)  # no vote comes
    assert node.current_term() == 3
    crash(node)
    again = ticked_node(tmp_path, peers=peers, join=True)
    try:
        assert again.current_term() == 0
        assert "elections this node stood in alone; starting at 0" in caplog.text
    finally:
        crash(again)


def test_a_joiner_is_fed_from_what_it_applied_only_when_this_log_holds_that_entry(tmp_path):
    """A node restored from a backup of this history is fed the log from the backup's
    index; one that names an entry of another term there (a backup from before a
    whole-cluster restore: another history, its indexes shared), or nothing, gets a dump
    written first."""
    for case, fed in (("same term", True), ("another term", False), ("nothing said", False)):
        node = ticked_node(tmp_path / case.replace(" ", "-"))
        try:
            lead_alone(node)
            commit_alone(node, 1_000, JOIN_FRESH_DUMP_ENTRIES + 50)  # no dump yet: past the bound
            index = node.raftCommitIndex - 10
            term = node.entry_term(index)
            applied = {"same term": (index, term), "another term": (index, term + 1)}.get(case)
            node.change_membership("add", _node("127.0.0.1:1", "x"), 60.0, lambda why: None, applied)
            tick(node)
            # fed now, from the log; or not until the dump it asked for is written
            assert node._joining is not None and node._joining.fed is fed, case
        finally:
            crash(node)


def test_a_learner_made_a_member_keeps_its_link_and_what_it_matched(tmp_path):
    """With a member down, a cluster that a new member makes a majority commits nothing
    until the new member hears the change: the learner's link was dropped at the add and
    the member's made anew (a second, until the joiner dialled again), and pysyncobj
    starts a member it adds with nothing matched."""
    node = ticked_node(tmp_path)
    try:
        lead_alone(node)
        commit_alone(node, 1_000, 5)
        learner = _node("127.0.0.1:1", "x")  # an address below the master's: the master dials it
        node.feed_learner(learner)
        link = node.transport._connections[learner]
        node.next_index[learner] = node.raftCommitIndex + 1
        node.match_index[learner] = matched = node.raftCommitIndex
        node.addNodeToCluster(learner, callback=lambda _r, _e: None)
        tick(node)
        assert learner in node.otherNodes and learner not in node.readonly_nodes
        assert node.transport._connections[learner] is link
        assert node.match_index[learner] == matched
    finally:
        crash(node)


def _feeding(node, learner: DialNode) -> int:
    """``node`` leads alone with a few entries and feeds ``learner``; the index it must hold."""
    lead_alone(node)
    commit_alone(node, 1_000, 5)
    node.change_membership("add", learner, 60.0, lambda why: None)
    tick(node)
    assert node._joining is not None and node._joining.fed
    return node._joining.target


def _fed_and_heard(node) -> tuple[DialNode, int]:
    """:func:`_feeding` a learner whose clock ``node`` then read; the learner, and the index
    it must hold."""
    learner = _node("127.0.0.1:1", "x")
    target = _feeding(node, learner)
    _clock_heard(node, learner)
    return learner, target


def _answer(node, learner: DialNode, holds: int, **applied) -> None:
    """The learner answers an append: it holds the log up to ``holds`` (and applied ``applied``)."""
    ack = {"type": "next_node_idx", "next_node_idx": holds + 1, "reset": False, "success": True}
    node._on_message(learner, {**ack, "term": node.raftCurrentTerm, **applied})
    tick(node)


def _clock_heard(node, learner: DialNode) -> None:
    """A keep-alive from the learner that echoes one of ``node``'s: its clock is read."""
    now = raft_node.monotonic_time()
    echoed = [now - 0.001, 0.0]  # the send time of one of node's keep-alives, held for nothing
    node._on_message(learner, {"type": KEEPALIVE, "clock_ms": 123_456, "sent": now, "echo": echoed})


def test_a_learner_is_added_once_it_applied_the_log_it_must_hold(tmp_path):
    """A learner answers an append once the entries are on its disk, then applies them and
    answers nothing meanwhile: added then, with a member down, it held every commit."""
    node = ticked_node(tmp_path / "new")
    try:
        learner, target = _fed_and_heard(node)
        _answer(node, learner, target, applied=target - 1)
        assert not node._joining.proposed  # it holds the log, and has not applied it yet
        _answer(node, learner, target, applied=target)
        assert node._joining.proposed
    finally:
        crash(node)
    node = ticked_node(tmp_path / "older")
    try:
        learner, target = _fed_and_heard(node)
        _answer(node, learner, target)  # a node of an older version says nothing of it
        assert node._joining.proposed
    finally:
        crash(node)


def test_a_learner_is_added_once_its_clock_is_known_and_it_counts_for_nothing_before(tmp_path):
    """A master whose new member made its majority (one member down) served nothing until
    two keep-alives had crossed after the add, short of a majority's clock readings."""
    node = ticked_node(tmp_path)
    try:
        learner = _node("127.0.0.1:1", "x")
        target = _feeding(node, learner)
        node.isNodeConnected = lambda _node: True  # every link up
        node._next_keepalive = 0.0
        tick(node)
        assert any(peer == learner and m.get("type") == KEEPALIVE for peer, m in node.sent)
        _answer(node, learner, target, applied=target)
        assert not node._joining.proposed  # its clock is not known yet
        _clock_heard(node, learner)
        assert node._status_now().peer_clocks == ()  # a learner's clock counts for nothing
        tick(node)
        assert node._joining.proposed
        tick(node)  # the change proposed is appended, and taken
        assert learner in node.otherNodes
        assert [c.ms for c in node._status_now().peer_clocks] == [123_456]
    finally:
        crash(node)


def test_a_learner_whose_clock_is_not_read_afresh_is_added_after_a_few_keep_alives(tmp_path, monkeypatch):
    """A reading taken long before, as the learner applied a backlog, would be stale when
    it starts to count; a learner whose keep-alives give none is not kept out for good."""
    node = ticked_node(tmp_path)
    try:
        learner, target = _fed_and_heard(node)
        start = raft_node.monotonic_time()
        monkeypatch.setattr(raft_node, "monotonic_time", lambda: start + 1.2)
        _answer(node, learner, target, applied=target)
        assert not node._joining.proposed  # its reading is 1.2 s old
        wait = CLOCK_WAIT_KEEPALIVES * node.settings.link_keepalive_s
        monkeypatch.setattr(raft_node, "monotonic_time", lambda: start + 1.2 + wait)
        tick(node)
        assert node._joining.proposed
    finally:
        crash(node)


def test_a_learner_that_took_long_to_catch_up_catches_up_again_to_what_was_committed_meanwhile(
    tmp_path, monkeypatch
):
    """The catch-up's target was the commit index when it began: a learner whose snapshot
    took minutes to ship while the cluster took writes was added as soon as it held that
    much, behind by all committed meanwhile, which it then applied in one go, answering
    nothing; with a member down (the new member needed for every majority), the cluster
    took no write meanwhile. It catches up in rounds, until a round takes no longer than
    an election timeout."""
    node = ticked_node(tmp_path)
    try:
        learner, target = _fed_and_heard(node)
        start = raft_node.monotonic_time()
        monkeypatch.setattr(raft_node, "monotonic_time", lambda: start + 30)  # a long shipment
        commit_alone(node, 2_000, 50)  # the cluster took writes meanwhile
        _clock_heard(node, learner)
        _answer(node, learner, target, applied=target)
        assert not node._joining.proposed  # behind by those 50: a round more
        assert node._joining.target == node.raftCommitIndex > target
        _answer(node, learner, node.raftCommitIndex, applied=node.raftCommitIndex)
        assert node._joining.proposed  # that round took no time
    finally:
        crash(node)
