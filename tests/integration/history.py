"""What the integration tests check after a run: every ready log, on every node."""

from __future__ import annotations

import numpy as np

from horologe.storage import check_store, ready_ids
from testkit.process_cluster import Cluster


def verify_ready_logs(
    cluster: Cluster, topic: str, acked: dict[str, int], among: list[int] | None = None
) -> dict:
    """Stop nothing; open every (stopped) node's store and check the delivery history.

    * no message twice in any node's ready log;
    * every acknowledged message delivered, never before its deliver_at;
    * the ready logs of all nodes identical.
    Returns lateness figures (ms) from the first node.
    """
    logs = []
    for i in among if among is not None else cluster.indexes:
        with cluster.store(i) as s:
            check_store(s)
            rows = s.read_ready(topic)
        ids = ready_ids(rows)
        assert len(ids) == len(set(ids)), f"n{i + 1}: {len(ids) - len(set(ids))} duplicates in the ready log"
        missing = set(acked) - set(ids)
        assert not missing, f"n{i + 1}: {len(missing)} acknowledged messages never delivered"
        early = rows["delivered_at_ms"] < rows["deliver_at_ms"]
        assert not early.any(), f"n{i + 1}: {int(early.sum())} delivered early"
        logs.append(rows)
    for i, rows in enumerate(logs[1:], 2):
        assert np.array_equal(rows, logs[0]), f"n{i}'s ready log differs from n1's"
    late = (logs[0]["delivered_at_ms"] - logs[0]["deliver_at_ms"]).astype(float)
    return {
        "n": len(late),
        "p50": float(np.percentile(late, 50)),
        "p99": float(np.percentile(late, 99)),
        "max": float(late.max()),
    }
