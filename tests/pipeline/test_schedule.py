"""Bulk scheduling against a real 3-node cluster, with the master killed mid-run."""

from __future__ import annotations

import csv
import json
import os
import signal
import threading
import time

from horologe.pipeline.column_mapping import ColumnMapping
from horologe.pipeline.poster import post_messages
from testkit.process_cluster import ADMIN, CLIENT


def stored(cluster) -> int:
    return cluster.status(cluster.wait_leader())["counters"]["stored"]


def kill_master_once_posting(cluster, done: threading.Event) -> threading.Thread:
    def killer():
        while not done.is_set():
            try:
                if stored(cluster) > 0:
                    cluster.signal(cluster.wait_leader(), signal.SIGKILL)
                    return
            except Exception:  # noqa: BLE001 - between polls the cluster may be electing
                pass
            time.sleep(0.05)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    return t


def test_posting_survives_a_master_kill_without_spark(make_cluster):
    cluster = make_cluster()
    urls = [cluster.url(i) for i in cluster.indexes]
    mapping = ColumnMapping(body_col="b", topic="bulk", deliver_after_col="a")
    msgs = [mapping.to_message({"b": f"row {k}", "a": "1h"}, int(time.time() * 1000)) for k in range(3000)]
    done = threading.Event()
    killer = kill_master_once_posting(cluster, done)
    stats = post_messages(msgs, urls, CLIENT, batch_size=100)
    done.set()
    killer.join()
    assert stats.accepted == 3000 and stats.refused == 0
    assert stored(cluster) == 3000  # every row once: retried batches were recognised by key


def test_spark_schedule_exactly_once_with_rejects(spark, make_cluster, tmp_path):
    from horologe.pipeline.schedule import run_schedule

    cluster = make_cluster()
    urls = [cluster.url(i) for i in cluster.indexes]
    path = tmp_path / "in.csv"
    bad = {7: ("", "30s"), 19: ("oops", "later"), 23: ("x", "999d")}
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["order", "body", "after", "tags"])
        for k in range(6000):
            body, after = bad.get(k, (f"cancel order {k}", "2h"))
            w.writerow([k, body, after, "timeout" if k % 2 else "timeout,vip"])
    mapping = ColumnMapping(
        body_col="body", topic="orders", tags_col="tags", deliver_after_col="after", key_col="order"
    )
    done = threading.Event()
    killer = kill_master_once_posting(cluster, done)
    summary = run_schedule(spark, str(path), mapping, urls, CLIENT, str(tmp_path / "rejects"), batch_size=200)
    done.set()
    killer.join()
    assert (summary.rows, summary.accepted, summary.rejected, summary.refused) == (6000, 5997, 3, 0)
    assert stored(cluster) == 5997
    rejects = [
        json.loads(line)
        for p in os.listdir(tmp_path / "rejects")
        if p.endswith(".json")
        for line in open(tmp_path / "rejects" / p)
    ]
    assert sorted(int(json.loads(r["row"])["order"]) for r in rejects) == [7, 19, 23]
    assert all(r["reason"] for r in rejects)
    again = run_schedule(spark, str(path), mapping, urls, CLIENT, str(tmp_path / "rejects2"), batch_size=500)
    assert again.accepted == 5997 and stored(cluster) == 5997  # a rerun stores nothing new
    assert ADMIN
