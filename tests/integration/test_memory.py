"""The Raft log is compacted by size: its commands stay under their byte budget on every node.

The log is on disk (cluster/raft/journal.py); the budget bounds the journal file and what
a restart replays. ``raft_log_bytes`` in /admin/status is the commands' size.
"""

from __future__ import annotations

import time

from .history import verify_ready_logs
from .load import wait_delivered

BUDGET = 1024 * 1024  # the smallest log_compaction_bytes allowed


def test_the_raft_log_is_compacted_by_size(make_cluster):
    cluster = make_cluster(extra_toml=f"log_compaction_bytes = {BUDGET}")
    now = int(time.time() * 1000)
    acked = {}
    body = "x" * 1000
    for n in range(40):  # ~4 MB of commands in 40 entries: four times the budget
        msgs = [{"topic": "t", "body": body, "deliver_at": now + 3_000 + n * 10 + k} for k in range(100)]
        for r in cluster.produce(0, msgs):
            acked[r["id"]] = r["deliver_at"]
    deadline = time.monotonic() + 20
    held = []
    while time.monotonic() < deadline:
        held = [cluster.status(i)["raft_log_bytes"] for i in cluster.indexes]
        if all(h <= BUDGET + 200_000 for h in held):  # the budget plus one entry at most
            break
        time.sleep(0.2)
    assert all(h <= BUDGET + 200_000 for h in held), held
    wait_delivered(cluster)
    cluster.stop_all()
    verify_ready_logs(cluster, "t", acked)  # compaction lost and duplicated nothing
