"""A leader ships a follower a snapshot it can continue from.

A follower sent a snapshot continues after the leader's compaction point. A compaction
during a shipment (every few seconds under sustained ingest) left it to continue from
entries that it lacked (they came after the shipped dump) and that the leader no longer
held: it was shipped a snapshot again, perhaps for ever. The log is kept while a shipment
is under way.

A shipment that finds a file of its dump removed by retention waits for a newer dump.
pysyncobj's send loop asked for the follower's next chunk again at once, and so shipped
the same dump from its start over and over for a heartbeat's time each tick (under the
simulator, whose clock does not move within a tick, for ever: seed 10 with ``--service
--retention``). The follower is left out of the rest of the tick's sends instead.
"""

from __future__ import annotations

import os
import time

from pysyncobj.monotonic import monotonic

from horologe.cluster import PRODUCE, Entry
from horologe.cluster.raft.node import KEEPALIVE
from horologe.storage import Message
from horologe.wheel import Watermark

from .test_snapshot_messages import PEERS
from .ticked import (
    ack,
    commit_proposed,
    commit_with,
    crash,
    lead_with_peers,
    peer,
    propose_entry,
    send_now,
    tick,
    ticked_node,
)

T = 1_767_225_600_000  # 2026-01-01 00:00 UTC


def _ship_over_ticks(leader, slow, first: int, monkeypatch) -> dict:
    """Follower ``slow`` is behind the log (its next index ``first``): the next tick starts
    shipping it the dump, and its first chunk takes a heartbeat's time to send, which ends
    the tick's sends; its connection's buffer is then full (``["backlog"]`` of what this
    returns: set it to 0 to drain it), so the shipment waits, tick after tick."""
    leader.next_index[slow] = first
    full = {"backlog": 0}
    monkeypatch.setattr(leader, "send_backlog", lambda node: full["backlog"] if node == slow else 0)
    record = leader.transport.send

    def slow_first_chunk(node, message):
        if node == slow and message.get("serialized") and message["serialized"][1]:
            time.sleep(leader.settings.heartbeat_s * 1.5)
        return record(node, message)

    monkeypatch.setattr(leader.transport, "send", slow_first_chunk)
    sent_before = len(leader.sent)
    send_now(leader)
    chunks = [m for n, m in leader.sent[sent_before:] if n == slow and m.get("serialized")]
    assert chunks and not chunks[-1]["serialized"][2], "the shipment spans ticks"
    full["backlog"] = 1 << 30
    return full


def _leading_past_a_dump(leader):
    """``leader`` leads its two peers, has a dump and entries after it; its peers, the one
    that acknowledged them, the other, and the first index its log holds."""
    lead_with_peers(leader)
    up, slow = peer(leader, 0), peer(leader, 1)
    commit_with(leader, up, 1_000, 3)
    leader.forceLogCompaction()
    tick(leader, 2)
    first = leader._journal[0][1]
    commit_with(leader, up, 2_000, 3)
    return up, slow, first


def test_no_compaction_while_a_shipment_is_under_way(tmp_path, monkeypatch):
    leader = ticked_node(tmp_path / "leader", peers=PEERS, ship_chunk_bytes=512)
    try:
        lead_with_peers(leader)
        fast, slow = peer(leader, 0), peer(leader, 1)
        commit_with(leader, fast, 1_000, 3)
        leader.forceLogCompaction()
        tick(leader, 2)
        shipped = leader._dump.current().index
        first = leader._journal[0][1]
        assert first == shipped - 1
        commit_with(leader, fast, 2_000, 3)

        full = _ship_over_ticks(leader, slow, first, monkeypatch)
        leader.forceLogCompaction()
        send_now(leader, 3)
        assert leader._journal[0][1] == first and leader._dump.current().index == shipped  # pinned

        # The buffer drains: the rest goes, and the follower continues from the shipped
        # dump's index, which it holds now.
        full["backlog"] = 0
        sent_before = len(leader.sent)
        send_now(leader)
        to_slow = [m for n, m in leader.sent[sent_before:] if n == slow]
        last_chunk = next(i for i, m in enumerate(to_slow) if m.get("serialized") and m["serialized"][2])
        assert to_slow[last_chunk + 1]["prevLogIdx"] == shipped
        send_now(leader, 3)  # the shipment is over: the forced compaction goes ahead
        assert leader._dump.current().index > shipped
    finally:
        crash(leader)


def test_a_shipment_missing_a_file_is_begun_once_a_tick_and_then_waits_for_a_newer_dump(tmp_path):
    leader = ticked_node(tmp_path / "leader", peers=PEERS, ship_chunk_bytes=512)
    try:
        lead_with_peers(leader)
        fast, slow = peer(leader, 0), peer(leader, 1)
        messages = [Message("t", b"x" * 100, T + 60_000, T) for _ in range(50)]
        commit_proposed(leader, fast, [propose_entry(leader, Entry(PRODUCE, Watermark(T), T, messages))])
        commit_with(leader, fast, T + 1, 3)
        leader.forceLogCompaction()
        tick(leader, 2)
        dump = leader._dump.current()
        store_dir = leader.state.store.directory
        victim = max(dump.store["files"])  # the last file shipped, removed as retention would
        os.rename(os.path.join(store_dir, victim), str(tmp_path / "aside"))
        leader.next_index[slow] = leader._journal[0][1]  # behind the log: shipped the dump

        sent_before = len(leader.sent)
        send_now(leader)
        sent = leader.sent[sent_before:]
        begun = [m for n, m in sent if n == slow and m.get("serialized") and m["serialized"][1]]
        assert len(begun) == 1, f"the shipment was begun {len(begun)} times in one tick"
        assert any(n == fast for n, _ in sent), "the other follower is still sent to"

        sent_before = len(leader.sent)
        send_now(leader)  # held back until a newer dump is written
        assert not [m for n, m in leader.sent[sent_before:] if n == slow and m.get("serialized")]
    finally:
        crash(leader)


def test_a_follower_taking_a_snapshot_counts_for_the_leaders_majority_while_its_keepalives_come(
    tmp_path, monkeypatch
):
    """A follower answers nothing until the last chunk of a snapshot is in (pysyncobj,
    syncobj.py:1022), and a leader that heard no majority answer for
    ``leader_fallback_timeout`` steps down (syncobj.py:679), ending the shipment: with the
    other follower down, a snapshot that took longer than that to ship was begun again in
    each new term and never arrived, and the cluster took no write. Its keep-alives, which
    name this leader, count as answers while it is shipped one."""
    leader = ticked_node(tmp_path / "leader", peers=PEERS, ship_chunk_bytes=512)
    try:
        up, slow, first = _leading_past_a_dump(leader)
        _ship_over_ticks(leader, slow, first, monkeypatch)
        assert leader.serializer.shipping_to(slow)
        # The other follower went down; the slow one has been taking chunks for a while.
        answered = leader._SyncObj__lastResponseTime
        answered[up] = answered[slow] = monotonic() - 3 * leader.settings.leader_fallback_timeout
        leader._on_message(slow, {"type": KEEPALIVE, "leader": leader.settings.raft})
        send_now(leader)
        assert leader.is_master()
        assert leader.serializer.shipping_to(slow)
        leader._on_message(up, {"type": KEEPALIVE, "leader": leader.settings.raft})  # not shipped: no answer
        answered[slow] = monotonic() - 3 * leader.settings.leader_fallback_timeout
        send_now(leader)
        assert not leader.is_master()
    finally:
        crash(leader)


def test_a_follower_installing_a_snapshot_shipped_whole_counts_until_it_answers(tmp_path, monkeypatch):
    """Its shipment ends with the last chunk taken, but the follower still receives what
    was queued, installs it and answers nothing meanwhile: with the other member down, an
    install longer than ``leader_fallback_timeout`` made the leader step down once."""
    leader = ticked_node(tmp_path / "leader", peers=PEERS, ship_chunk_bytes=512)
    try:
        up, slow, first = _leading_past_a_dump(leader)
        full = _ship_over_ticks(leader, slow, first, monkeypatch)
        full["backlog"] = 0
        send_now(leader)  # the rest goes, the last chunk with it
        assert not leader.serializer.shipping_to(slow)
        answered = leader._SyncObj__lastResponseTime
        long_ago = monotonic() - 3 * leader.settings.leader_fallback_timeout
        answered[up] = answered[slow] = long_ago
        leader._on_message(slow, {"type": KEEPALIVE, "leader": leader.settings.raft})
        send_now(leader)
        assert leader.is_master()  # installing: its keep-alives count
        assert slow.address in leader._status_now().shipping
        ack(leader, slow, leader._dump.current().index)  # installed: it answers
        answered[up] = answered[slow] = long_ago
        leader._on_message(slow, {"type": KEEPALIVE, "leader": leader.settings.raft})
        send_now(leader)
        assert not leader.is_master()  # answering again: keep-alives count for nothing
    finally:
        crash(leader)


def test_a_shipment_whose_link_dropped_begins_again_from_its_first_chunk(tmp_path, monkeypatch):
    """The chunks in a dropped connection's write buffer are lost with it, and a link
    dialled again before the next tick's sends (which end the shipment of a follower found
    disconnected) went on with the chunk after them: the follower appended it to what it
    had, its shipped store missing a stretch, and halted installing it."""
    leader = ticked_node(tmp_path / "leader", peers=PEERS, ship_chunk_bytes=512)
    try:
        up, slow, first = _leading_past_a_dump(leader)
        full = _ship_over_ticks(leader, slow, first, monkeypatch)
        monkeypatch.setattr(leader.transport, "_connToNode", lambda conn: slow)
        leader.transport._onDisconnected(object())  # the link to it dropped, its buffer lost
        leader.connected_nodes.add(slow)  # and came up again at once
        full["backlog"] = 0
        sent_before = len(leader.sent)
        send_now(leader)
        chunks = [m["serialized"] for n, m in leader.sent[sent_before:] if n == slow and m.get("serialized")]
        assert chunks and chunks[0][1], "shipped again from its first chunk"
    finally:
        crash(leader)
