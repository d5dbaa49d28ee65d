"""One pull turn reads a bounded part of a ready log, whatever the filter rejects."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from horologe.cluster import StateMachine
from horologe.node.consumers import SCAN_LIMIT, Consumers, TagFilter
from horologe.node.receipts import Receipts
from horologe.storage import ReadyEntry, Storage, StorageConfig

T = 1_767_225_600_000


def test_a_filter_that_matches_nothing_reads_at_most_scan_limit_entries(tmp_path):
    sm = StateMachine(Storage(str(tmp_path / "s"), StorageConfig(fsync=False)))
    n = SCAN_LIMIT + 100_000
    sm.store.apply(1, lambda tx: tx.append_ready("t", [ReadyEntry(5, k, 0, T, T) for k in range(n)]))
    svc = SimpleNamespace(lock=threading.Lock(), state=sm, store=sm.store)
    consumers = Consumers(svc, (1000,), 50, Receipts("secret"))
    out, skipped = [], []
    consumers._scan("g", "t", TagFilter.parse("red"), 32, T, out, skipped, 30_000)
    assert out == [] and len(skipped) == SCAN_LIMIT  # skip-acks for what it read, no more
    assert [off for _, _, off in skipped] == list(range(SCAN_LIMIT))
