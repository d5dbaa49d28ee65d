"""The links a backup's point makes in the store (``RaftNode.take_backup``) when its asker
is gone before it took them: a timeout, a cancelled request. Nobody would remove them,
and they would hold a copy of the whole store's disk space until the node restarted."""

from __future__ import annotations

import asyncio
import os

import pytest

from horologe.cluster.errors import WriterTimeoutError
from horologe.storage.store import BACKUP_DIR

from .ticked import commit_alone, crash, lead_alone, tick, ticked_node


@pytest.fixture
def node(tmp_path):
    """A node leading alone, with entries applied (a backup needs two), ticked by hand:
    nothing answers a question before the test ticks it."""
    made = ticked_node(tmp_path, proposal_timeout_s=0.001)
    lead_alone(made)
    commit_alone(made, 1_000, 2)
    yield made
    crash(made)


def _links(node) -> list[str]:
    folder = os.path.join(node.state.store.directory, BACKUP_DIR)
    return os.listdir(folder) if os.path.isdir(folder) else []


async def test_a_backup_timed_out_before_the_writer_linked_it_leaves_no_links(node):
    with pytest.raises(WriterTimeoutError):
        await node.take_backup("b1")
    tick(node)  # the tick thread gets to the question only now, and links the store
    assert _links(node) == []


async def test_a_backup_cancelled_before_the_writer_linked_it_leaves_no_links(node):
    asked = asyncio.ensure_future(node.take_backup("b1"))
    await asyncio.sleep(0)  # the question is queued
    asked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asked
    tick(node)
    assert _links(node) == []


@pytest.mark.parametrize("settled", [False, True], ids=["answer-on-its-way", "answer-not-yet-taken"])
async def test_a_backup_cancelled_after_the_writer_linked_it_leaves_no_links(node, settled):
    """Answered on the tick thread, the asker's wait ends before it took the answer: while
    the answer crosses to the loop (it is then dropped there), or once it is in the
    asker's future but before the asker ran again."""
    asked = asyncio.ensure_future(node.take_backup("b1"))
    await asyncio.sleep(0)
    tick(node)  # linked; the answer waits in the crossing
    assert _links(node) == ["b1"]
    if settled:
        node._crossing.run_all()
    asked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asked
    node._crossing.run_all()
    tick(node)
    assert _links(node) == []


async def test_a_backup_taken_keeps_its_links_until_its_taker_removes_them(node):
    asked = asyncio.ensure_future(node.take_backup("b1"))
    await asyncio.sleep(0)
    tick(node)
    node._crossing.run_all()
    point = await asked
    tick(node)
    assert _links(node) == ["b1"] and os.path.isdir(point.folder)
