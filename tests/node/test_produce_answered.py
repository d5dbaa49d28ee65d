"""What a produce answers once its entry committed (NodeService.produce_answered)."""

from __future__ import annotations

import asyncio

from horologe.node.clock import system_clock
from horologe.node.config import NodeConfig
from horologe.node.service import NodeService
from horologe.storage import CorruptLogError, Message, MessageColumns, MessageId

T = 1_767_225_600_000


def test_a_damaged_read_after_the_commit_answers_what_was_done_and_halts_the_node(tmp_path, monkeypatch):
    """The time of a message a key named is read after the entry committed: a damaged
    read there answered 503 store_damaged ("nothing was done"), which clients send again,
    storing the batch's other messages twice."""
    config = NodeConfig(node_id="n1", data_dir=str(tmp_path), http="127.0.0.1:1", raft="127.0.0.1:2")
    svc = NodeService(config, system_clock(0))
    try:
        named = str(MessageId(T // 3_600_000, 7))

        async def produced(messages):
            return [named, str(MessageId(T // 3_600_000, 8))], [0]  # the first's key named one there

        def damaged(mid):
            raise CorruptLogError("hours/00000001.data", 4096)

        halted = []
        monkeypatch.setattr(svc, "_produce", produced)
        monkeypatch.setattr(svc.view.reads, "current_place", damaged)
        monkeypatch.setattr(svc.damage, "_halt", lambda why, generation: halted.append(why))
        messages = MessageColumns.from_messages([Message("t", b"a", T + 5, T), Message("t", b"b", T + 6, T)])
        ids, times = asyncio.run(svc.produce_answered(messages))
        assert ids[0] == named and times == [T + 5, T + 6]  # done: answered with the time asked
        assert halted  # and the node halts
    finally:
        svc.view.close()
        svc._writer.store.close()
