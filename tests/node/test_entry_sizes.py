"""No entry the node proposes passes MAX_ENTRY_BYTES, acks with the longest names included.

An entry of ``append_batch_bytes`` (4 MiB) or more travels in pysyncobj's "transmission"
parts, which skip the append rule; the node keeps its entries under a quarter of that.
"""

from __future__ import annotations

import asyncio

import pytest

from horologe.cluster import ACK
from horologe.node.consumers.receipts import Receipts
from horologe.node.consumers.service import Consumers
from horologe.node.group_commit import MAX_ENTRY_BYTES
from horologe.storage import ReadyEntry, tag_signature

from .local_log import LocalLog

T = 1_767_225_600_000
DAY_MS = 86_400_000
GROUP = "g" * 128  # the longest names a group and a topic may have
TOPIC = "t" * 128
N = 10_000  # ready entries; every other one is passed over or acked: 5,000 ranges


@pytest.fixture
def log(tmp_path):
    log = LocalLog(str(tmp_path / "s"), lambda: T)
    # Even offsets untagged and due; odd ones tagged red and due only tomorrow.
    red = tag_signature("red")
    rows = [ReadyEntry(5, k, red if k % 2 else 0, T + DAY_MS if k % 2 else T, T) for k in range(N)]
    log.machine.store.apply(1, lambda tx: tx.append_ready(TOPIC, rows))
    log.index = 1
    log.publish()
    yield log
    log.close()


def _ack_entry_sizes(log: LocalLog) -> list[tuple[int, int]]:
    """(encoded bytes, acks) of each A entry proposed."""
    return [(len(e.encode()), len(e.acks)) for e in log.proposed if e.kind == ACK]


def test_skip_acks_of_one_pull_go_in_entries_under_the_cap(log):
    """A pull with a tag filter acks for its group what the filter passed over, as one
    submission whatever its size: here 5,000 ranges (every other entry), 281 bytes each
    with 128-character names, 1.4 MB in one A entry, while GroupCommit's estimate (64
    bytes an ack) said 320 KB. With SCAN_LIMIT entries scanned it would be 36 MB."""
    consumers = Consumers(log.view, log.propose, log.clock, (1000,), 0, Receipts("secret"))

    async def run() -> None:
        task = asyncio.create_task(consumers.run())
        pulled = await consumers.pull(GROUP, TOPIC, "red", 10, 0, 30_000)
        assert len(pulled.taken) == 0  # the red ones are not due yet
        for _ in range(500):  # the skip-acks are queued for the committer: until it has proposed them
            if sum(n for _, n in _ack_entry_sizes(log)) >= N // 2:
                break
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(run())
    sizes = _ack_entry_sizes(log)
    assert sum(n for _, n in sizes) == N // 2
    assert max(size for size, _ in sizes) <= MAX_ENTRY_BYTES, sizes
    progress = log.view.group_progress(GROUP, TOPIC)
    assert all(progress.is_acked(k) for k in range(0, N, 2)) and not progress.is_acked(1)


def test_an_ack_call_naming_many_ranges_goes_in_entries_under_the_cap(log):
    """A client's ack call opens its receipts into ranges (a pull's batch receipt names up
    to 1,000), all submitted at once: five batches of 1,000 scattered offsets made one
    A entry of 1.4 MB."""
    receipts = Receipts("secret")
    consumers = Consumers(log.view, log.propose, log.clock, (1000,), 0, receipts)
    batches = [
        receipts.issue_batch(GROUP, TOPIC, list(range(b * 2000, (b + 1) * 2000, 2)), T + 30_000)[0]
        for b in range(5)
    ]

    async def run() -> int:
        task = asyncio.create_task(consumers.run())
        acked = await consumers.ack(GROUP, TOPIC, batches)
        task.cancel()
        return acked

    assert asyncio.run(run()) == N // 2
    sizes = _ack_entry_sizes(log)
    assert sum(n for _, n in sizes) == N // 2
    assert max(size for size, _ in sizes) <= MAX_ENTRY_BYTES, sizes
