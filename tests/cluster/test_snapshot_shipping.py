"""A leader ships a follower a snapshot it can continue from.

A follower sent a snapshot continues after the leader's compaction point. A compaction
during a shipment (every few seconds under sustained ingest) left it to continue from
entries that it lacked (they came after the shipped dump) and that the leader no longer
held: it was shipped a snapshot again, perhaps for ever. The log is kept while a shipment
is under way.
"""

from __future__ import annotations

import time

from .test_snapshot_messages import PEERS
from .ticked import commit_with, crash, lead_with_peers, peer, send_now, tick, ticked_node


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

        # The slow follower is behind the log: the next tick starts shipping it the dump, and
        # its first chunk takes a heartbeat's time to send, which ends the tick's sends; its
        # connection's buffer is then full, so the shipment waits, tick after tick.
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
