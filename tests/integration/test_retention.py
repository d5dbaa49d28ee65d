"""Retention on three real node processes: the master cuts delivered data once it is older
than ``retention_ms`` and every consumer group has passed it; every node applies the same
cut (their stores are compared byte for byte), a removed message answers 404 ``expired``,
and consumers keep their offsets.

Hour files go only once their hour is over and older than the retention, so the cluster
is restarted with every clock three hours ahead (the test-only offset): to the cluster,
the first messages were then delivered three hours ago.
"""

from __future__ import annotations

import os
import time

from horologe.storage import check_store
from testkit.process_cluster import CLIENT

from .load import wait_delivered

HOUR_MS = 3_600_000
EXTRA = "retention_ms = 3600000\nretention_check_ms = 200\n"


def drain(c, topic: str, group: str, n: int, timeout_s: float = 20.0, **pull) -> list:
    got: list = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        got += c.pull(topic, group, max=n - len(got), wait_ms=500, **pull)
    assert len(got) == n, f"{group} got {len(got)} of {n}"
    return got


def status(cluster, message_id: str) -> tuple[int, str]:
    """What the master answers for the message: (status, state or error code)."""
    i = cluster.wait_leader()
    r = cluster.http.get(f"{cluster.url(i)}/v1/messages/{message_id}", token=CLIENT)
    return r.status, r.body.get("state") or r.body.get("error", {}).get("code")


def committed_files(cluster, i: int) -> dict[str, bytes]:
    """Node i's committed store files (the caches and the journal's frames aside)."""
    with cluster.store(i) as s:
        check_store(s)
        lengths = dict(s.file_lengths())
    root = os.path.join(cluster.data_root, f"n{i + 1}", "store")
    out = {}
    for rel, length in lengths.items():
        with open(os.path.join(root, rel), "rb") as f:
            out[rel] = f.read(length)
    return out


def test_retention_cuts_the_same_on_every_node_once_every_group_passed(make_cluster):
    cluster = make_cluster(extra_toml=EXTRA)
    c = cluster.client(0)
    batch = [{"topic": "old", "body": f"{k}", "key": f"k{k}"} for k in range(20)]
    sent = [s.id for s in c.produce_batch(batch)]
    first = drain(c, "old", "fast", 20)
    c.ack("old", "fast", [m.receipt for m in first])
    (one,) = drain(c, "old", "slow", 1)
    c.ack("old", "slow", [one.receipt])  # "slow" exists now, and lags at offset 1
    rest = drain(c, "old", "slow", 19, visibility_ms=3_000)  # leased, not acked yet

    cluster.stop_all()
    skew = {"HOROLOGE_TEST_MODE": "1", "HOROLOGE_TEST_CLOCK_OFFSET_MS": str(3 * HOUR_MS)}
    cluster.env = {i: dict(skew) for i in cluster.indexes}
    cluster.start_all()
    time.sleep(2)  # ten retention turns: "slow" holds the ready log, and so the hour
    assert status(cluster, sent[0]) == (200, "delivered")

    c = cluster.client(0)
    # Their leases kept the time they had left when the cluster stopped (at most 3 s: the
    # hours the clocks moved on were no master's time, cluster/leases.py), then ended.
    again = drain(c, "old", "slow", 19)
    assert sorted(m.id for m in again) == sorted(m.id for m in rest)
    c.ack("old", "slow", [m.receipt for m in again])
    deadline = time.monotonic() + 20
    while status(cluster, sent[0]) != (404, "expired"):
        assert time.monotonic() < deadline, status(cluster, sent[0])
        time.sleep(0.2)
    assert all(status(cluster, mid) == (404, "expired") for mid in sent)

    # offsets go on: the next message of the topic is offset 20, for both groups
    (new,) = c.produce_batch([{"topic": "old", "body": "after the cut", "key": "k0"}])
    assert new.id not in sent  # its key went with its hour
    for group in ("fast", "slow"):
        (m,) = drain(c, "old", group, 1)
        assert m.id == new.id
        c.ack("old", group, [m.receipt])
    wait_delivered(cluster)  # every node applied the last delivery before files are compared
    cluster.stop_all()

    trees = [committed_files(cluster, i) for i in cluster.indexes]
    assert trees[0] == trees[1] == trees[2]
    with cluster.store(0) as s:
        assert s.ready_base("old") == 20 and s.ready_count("old") == 21
        assert s.read_ready("old")["global_index"].tolist() == [int(new.id[8:], 16)]
        assert s.meta("retained_from_hour") > int(sent[0][:8], 16)
