"""A dump that cannot be loaded halts the replica; a long install does not start an election.

pysyncobj logs and forgets whatever its deserializer raises. At start, a node with a
damaged dump went on with nothing applied: it acknowledged entries, could lead, and never
applied or halted. On a follower, a failed install was answered as a success, with the
follower's old last index, whose entries nothing had checked against the leader's.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from pysyncobj.monotonic import monotonic

from sim.disk import SyncedDisk
from sim.run import sim_root
from sim.world import fresh_dir

from .test_snapshot_messages import PEERS, leader_in_term_two
from .ticked import commit_alone, crash, journal_entries, lead_alone, peer, ship, tick, ticked_node


@pytest.fixture
def pair(tmp_path):
    """A leader of term 2 with a dump of its store, and a follower that never heard of it."""
    leader = leader_in_term_two(tmp_path / "leader")
    follower = ticked_node(tmp_path / "follower", peers=PEERS)
    yield leader, follower
    crash(leader)
    crash(follower)


def successes(node) -> list[dict]:
    return [m for _, m in node.sent if m.get("type") == "next_node_idx" and m.get("success")]


def test_a_damaged_dump_at_start_halts_the_node(tmp_path):
    leader = leader_in_term_two(tmp_path / "n")
    crash(leader)
    dump = tmp_path / "n" / "raft" / "snapshot"
    data = bytearray(dump.read_bytes())
    data[len(data) // 2] ^= 0xFF
    dump.write_bytes(bytes(data))
    again = ticked_node(tmp_path / "n")
    try:
        tick(again)
        assert again.state.halted and "cannot load the Raft dump" in again.state.halted
        ends = monotonic() + again.settings.raft_max_timeout + 0.2  # past its election deadline
        while monotonic() < ends:
            again.doTick(0.01)
        assert not again.is_master()  # a halted replica never stands for election
    finally:
        crash(again)


def test_a_damaged_read_on_the_loop_halts_the_replica_unless_an_install_replaced_its_files(tmp_path):
    """A read on the loop that met damage (node/store_damage.py) halts the replica on the
    tick thread, which tells the loop. One made at an older generation of the store than
    the writer's may have read a shipped snapshot's new files at the old state's offsets,
    in the moment before the loop followed the install: nothing is damaged, no halt."""
    node = ticked_node(tmp_path / "n")
    try:
        lead_alone(node)
        generation = node.state.store.generation
        node._crossing.posted.clear()
        node.halt_damaged("store damaged: read before the install", generation - 1)
        tick(node)
        assert node.state.halted is None and node._crossing.posted == []
        node.halt_damaged("store damaged: x.log: corrupt at offset 7", generation)
        tick(node)
        assert node.state.halted == "store damaged: x.log: corrupt at offset 7"
        told = [args[0] for fn, args in node._crossing.posted if fn == node._applied_on_loop]
        assert told and told[-1].halted == node.state.halted
    finally:
        crash(node)


def test_a_shipped_dump_that_cannot_be_installed_halts_the_follower_unanswered(pair, monkeypatch):
    leader, follower = pair

    def no_room(src):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(follower.state.store, "restore", no_room)
    ship(leader, follower, peer(follower, 1), term=2)
    assert follower.state.halted and "No space left" in follower.state.halted
    assert successes(follower) == []


def test_a_long_install_leaves_a_whole_election_timeout_after_it(pair, monkeypatch):
    leader, follower = pair
    store = follower.state.store
    restore = store.restore

    def slow_restore(src):  # a store of many gigabytes
        time.sleep(follower.settings.raft_max_timeout + 0.1)
        restore(src)

    monkeypatch.setattr(store, "restore", slow_restore)
    ship(leader, follower, peer(follower, 1), term=2)
    assert store.applied_index == 4 and len(successes(follower)) == 1
    left = follower.election_deadline - monotonic()
    assert left >= follower.settings.raft_min_timeout * 0.5


@pytest.fixture
def stale_install(tmp_path):
    """A leader alone whose dump is at 5 and whose log goes on to ``last``, and a follower
    handed every entry up to ``last`` (committed): the follower, then the leader's history."""
    nodes = []

    def make(last: int):
        leader = ticked_node(tmp_path / "leader")
        nodes.append(leader)
        lead_alone(leader)
        commit_alone(leader, 1_000, 3)  # 3..5
        early = journal_entries(leader)
        leader.forceLogCompaction()
        tick(leader, 2)
        assert leader._dump.current().index == 5
        commit_alone(leader, 2_000, last - 5)  # 6..last
        history = early + [e for e in journal_entries(leader) if e[1] > 5]
        follower = ticked_node(tmp_path / "follower", peers=PEERS)
        nodes.append(follower)
        message = {
            "type": "append_entries",
            "term": 1,
            "commit_index": last,
            "prevLogIdx": 1,
            "prevLogTerm": 0,
        }
        follower._on_message(peer(follower, 0), message | {"entries": history[1:]})
        tick(follower)
        assert follower.raftLastApplied == last
        return leader, follower, history

    yield make
    for node in nodes:
        crash(node)


def test_an_install_keeps_the_entries_the_follower_holds_after_the_snapshot(stale_install):
    """A stale reset can make a leader ship a snapshot at S to a follower that has already
    acknowledged entries past S. pysyncobj's install cleared the journal, dropping those
    entries, which the leader still counts as the follower's. A follower that holds S with
    the snapshot's term holds the leader's log up to S (Log Matching): it keeps what
    follows, and answers from S + 1, so that the leader checks that suffix before counting it."""
    leader, follower, history = stale_install(8)
    follower.sent.clear()
    ship(leader, follower, peer(follower, 0), term=1)
    assert journal_entries(follower) == history[3:]  # from 4: the snapshot's two, then 6..8
    assert [m["next_node_idx"] for m in successes(follower)] == [6]
    assert follower.state.store.applied_index == 8


def test_an_install_older_than_the_followers_own_dump_keeps_its_journal(stale_install):
    """A stale reset can ship a snapshot at S to a follower that has applied past S and
    compacted its own log past it, so that its journal no longer holds S. pysyncobj cleared
    that journal and began it again at S: the entries after S that the follower had
    acknowledged were gone from its log (a vote it then gives could elect a node without
    them). The follower's own dump is newer and holds the same history (its entries up to
    it were committed): it is loaded instead, its journal kept, and it answers from its
    own dump's index + 1."""
    leader, follower, _ = stale_install(11)
    follower.forceLogCompaction()
    tick(follower, 2)
    assert follower._dump.current().index == 11
    kept = journal_entries(follower)
    assert kept[0][1] == 10  # its journal begins with its own dump's two entries
    follower.sent.clear()
    ship(leader, follower, peer(follower, 0), term=1)  # the leader's dump at 5
    assert journal_entries(follower) == kept
    assert follower.raftLastApplied == 11
    assert [m["next_node_idx"] for m in successes(follower)] == [12]
    assert follower.state.store.applied_index == 11


@pytest.fixture
def power_disk():
    """A folder on the simulator's disk (sim/disk.py): a power loss keeps what was fsynced."""
    folder = fresh_dir(os.path.join(sim_root(), f"install-test-{os.getpid()}"))
    disk = SyncedDisk()
    disk.install(folder)
    try:
        yield disk, Path(folder)
    finally:
        disk.uninstall()
        fresh_dir(folder)
        os.rmdir(folder)


def test_a_power_loss_during_an_install_leaves_a_node_that_starts(power_disk, monkeypatch):
    """pysyncobj received a shipped dump into a temp file it renamed over the node's own
    dump unsynced. A power loss before the install ended left that name holding a torn or
    empty file, and the restarted node halted: it could not load its Raft dump. The
    shipped dump is received beside the node's own, fsynced whole before it is taken, and
    the own dump is replaced only by the installed manifest."""
    disk, folder = power_disk
    leader = leader_in_term_two(folder / "leader")
    follower = ticked_node(folder / "follower", peers=PEERS)
    store = follower.state.store

    def power_goes(src):
        raise OSError(5, "the power went during the install")

    monkeypatch.setattr(store, "restore", power_goes)
    ship(leader, follower, peer(follower, 1), term=2)
    crash(follower)
    crash(leader)
    for part in ("raft", "store"):  # the test's raft-port file is no node's
        disk.lose_power(str(folder / "follower" / part), random.Random(3))
    again = ticked_node(folder / "follower", peers=PEERS)
    try:
        tick(again)
        assert again.state.halted is None
        assert not (folder / "follower" / "raft" / "snapshot.incoming").exists()  # shipped again
    finally:
        crash(again)
