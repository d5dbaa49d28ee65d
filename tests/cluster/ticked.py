"""Raft nodes in the test's own thread, ticked one step at a time (pysyncobj's ``autoTick``
off), for windows too narrow to hit with a tick thread running.

Every part of the shell is the real one: pysyncobj and each override, the journal, the dump
writer, the append rule, the state machine and its store. Only the event loop is missing:
what the tick thread would post to it is kept in :attr:`HeldCrossing.posted`. A peer is a
name the node never reaches; a test plays it by handing messages to ``node._on_message``,
as pysyncobj's transport would, and reads what the node sent from :func:`sent`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pysyncobj import FAIL_REASON

from horologe.cluster import SYNC, ClusterSettings, Entry, Peer, StateMachine
from horologe.cluster.raft import node as raft_node
from horologe.cluster.raft.node import RaftNode
from horologe.cluster.raft.snapshot_stream import tar_chunks
from horologe.storage import Storage
from horologe.wheel import Watermark
from testkit.process_cluster import free_ports


class HeldCrossing:
    """A crossing with no loop behind it: posts are kept, and run by nobody."""

    def __init__(self) -> None:
        self.posted: list[tuple[Callable, tuple]] = []

    def post(self, fn: Callable, *args) -> None:
        self.posted.append((fn, args))

    def require_off_loop(self, what: str) -> None:
        pass

    def run_all(self) -> list[tuple[Callable, tuple]]:
        """Run what was posted, as the loop would, in order; return it."""
        posted, self.posted = self.posted, []
        for fn, args in posted:
            fn(*args)
        return posted


def ticked_node(data_dir, peers: tuple[str, ...] = (), on_monotonic_step=None, **settings) -> RaftNode:
    """A node whose data lives in ``data_dir`` (start it again on the same folder to
    restart it), with ``peers`` named but never reached; ``settings`` are ClusterSettings'.
    A monotonic clock that goes back fails the test, unless ``on_monotonic_step`` takes it.
    A restart keeps the node's address: it is its identity in the replicated membership."""
    kept = data_dir / "raft-port"
    if not kept.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        kept.write_text(str(free_ports(1)[0]))
    port = int(kept.read_text())
    base = ClusterSettings(
        "n0",
        f"127.0.0.1:{port}",
        str(data_dir),
        tuple(Peer(f"p{i}", addr, "127.0.0.1:1") for i, addr in enumerate(peers)),
        insecure_dev=True,
    )
    store = Storage(str(data_dir / "store"))
    node = RaftNode(
        replace(base, **settings),
        StateMachine(store),
        HeldCrossing(),
        lambda _applied: None,
        lambda _role: None,
        auto_tick=False,
        on_monotonic_step=on_monotonic_step or _clock_went_back,
    )
    node.sent = []  # (peer, message) for every message the node sent

    def send(peer, message) -> bool:
        node.sent.append((peer, message))
        return False

    node._send_raw = send  # every send, as the seam's _outgoing has it, ends here
    node.transport._preventConnectNodes |= node.otherNodes  # never dialled
    return node


def _clock_went_back(seconds: float) -> None:
    raise AssertionError(f"the monotonic clock went back {seconds} s")


def peer(node: RaftNode, k: int):
    """The node's k-th peer (by address), as pysyncobj names it in messages."""
    return sorted(node.otherNodes, key=lambda n: n.address)[k]


def heartbeat(node: RaftNode, sender, term: int, **fields) -> None:
    """``sender``, leading in ``term``, sends ``node`` an append with no entries."""
    message = {"type": "append_entries", "term": term, "commit_index": 0, "prevLogIdx": 0, "prevLogTerm": 0}
    node._on_message(sender, message | {"entries": [], **fields})


def ship(leader: RaftNode, follower: RaftNode, sender, term: int) -> None:
    """Hand ``follower`` the leader's current dump, chunk by chunk, as sent by ``sender``
    (one of the follower's peers) in ``term``."""
    chunks = list(tar_chunks(leader._dump.current(), leader.state.store.directory))
    for i, data in enumerate(chunks):
        chunk = (data, i == 0, i == len(chunks) - 1)
        message = {"type": "append_entries", "term": term, "commit_index": 0, "serialized": chunk}
        follower._on_message(sender, message)


def tick(node: RaftNode, times: int = 1) -> None:
    for _ in range(times):
        node.doTick(0)


def run_for(node: RaftNode, monkeypatch, seconds: float, step: float = 0.02) -> None:
    """The node runs ``seconds`` on from its monotonic clock's reading (patched from then
    on), ticking every ``step`` as its tick thread would: time it did not run through, it
    does not count as its leader's silence (awake_clock.py)."""
    start = raft_node.monotonic_time()
    for k in range(int(seconds / step) + 2):  # from a tick at the start: no stop before it
        monkeypatch.setattr(raft_node, "monotonic_time", lambda at=start + step * k: at)
        tick(node)


def propose(node: RaftNode, ms: int) -> list:
    """Propose a watermark-only entry at ``ms``; the list gets (result, error) once answered."""
    return propose_entry(node, Entry(SYNC, Watermark(ms), ms))


def propose_entry(node: RaftNode, entry: Entry) -> list:
    """Propose ``entry``; the list gets (result, error) once answered."""
    answers: list = []
    node.apply_entry(entry.encode(), callback=lambda res, err: answers.append((res, err)))
    return answers


def deadline_passed(node: RaftNode) -> None:
    """The node's election deadline passed, an election timeout after it last heard a
    leader, by its clock of the time it ran through (awake_clock.py)."""
    node.election_deadline = 0
    node._leader_contact_at = float("-inf")


def lead_alone(node: RaftNode) -> None:
    """Tick a node without peers until it leads and has applied its election's entry; its
    election deadline is moved to now, rather than waited for."""
    deadline_passed(node)
    for _ in range(20):
        tick(node)
        if node.is_master() and node.raftLastApplied == node.raftCommitIndex > 0:
            return
    raise AssertionError("a node alone did not take the lead")


def commit_alone(node: RaftNode, first_ms: int, count: int) -> None:
    """Commit and apply ``count`` entries on a node leading alone."""
    answers = [propose(node, first_ms + i) for i in range(count)]
    for _ in range(20):
        if all(answers):
            break
        tick(node)
    assert all(a == [(a[0][0], FAIL_REASON.SUCCESS)] for a in answers), answers


def crash(node: RaftNode) -> None:
    """The process dies here: no tick more. Its files are closed so that a restart in this
    process can open them (the store syncs on close what every apply synced already; the
    Raft journal's unsynced tail, if any, stays as a crash would leave it before power goes)."""
    node._doDestroy()
    node.state.store.close()


def journal_entries(node: RaftNode) -> list[tuple[bytes, int, int]]:
    return [(bytes(cmd), idx, term) for cmd, idx, term in node._journal]


def send_now(node: RaftNode, times: int = 1) -> None:
    """Tick a leader with its heartbeat due, so that it sends every follower what it lacks."""
    for _ in range(times):
        node._SyncObj__newAppendEntriesTime = 0
        tick(node)


def stand(node: RaftNode) -> None:
    """Have a node with named peers stand for election now: its deadline passes, it asks
    for pre-votes, a majority of its peers grants them, and it stands (a candidate in the
    next term, its vote requests sent)."""
    tick(node)  # started: a node stands in nothing before its first tick took its membership
    deadline_passed(node)
    tick(node)  # it asks for a pre-vote
    others = sorted(node.otherNodes, key=lambda n: n.address)
    for sender in others[: len(others) // 2]:
        node._on_message(
            sender, {"type": "pre_vote_answer", "term": node.current_term() + 1, "granted": True}
        )
    tick(node)  # it stands


def lead_with_peers(node: RaftNode) -> None:
    """Make a node with named peers lead: its peers count as linked, a majority grants its
    pre-vote, and the first votes."""
    node.connected_nodes |= node.otherNodes
    stand(node)
    term = node.current_term()
    node._on_message(peer(node, 0), {"type": "response_vote", "term": term})
    assert node.is_master()


def ack(node: RaftNode, sender, last: int) -> None:
    """``sender`` answers the leader ``node`` that it holds everything up to ``last``."""
    answer = {"type": "next_node_idx", "next_node_idx": last + 1, "reset": False, "success": True}
    node._on_message(sender, answer | {"term": node.current_term()})


def commit_with(node: RaftNode, sender, first_ms: int, count: int) -> None:
    """Commit and apply ``count`` entries on a leader, ``sender`` acknowledging them."""
    commit_proposed(node, sender, [propose(node, first_ms + i) for i in range(count)])


def commit_proposed(node: RaftNode, sender, answers: list[list]) -> None:
    """Tick a leader, ``sender`` acknowledging, until each of the proposals whose
    ``answers`` lists are given committed and was applied."""
    for _ in range(20):
        if all(answers):
            break
        tick(node)
        ack(node, sender, node.last_log_index())
    assert all(a and a[0][1] == FAIL_REASON.SUCCESS for a in answers), answers
