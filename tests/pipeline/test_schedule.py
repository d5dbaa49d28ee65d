"""Bulk scheduling against a real 3-node cluster, with the master killed mid-run."""

from __future__ import annotations

import csv
import json
import os
import signal
import threading
import time

import pytest

from horologe.pipeline.column_mapping import ColumnMapping
from horologe.pipeline.poster import Poster, post_messages
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


def test_batches_over_a_nodes_limits_are_posted_in_halves_and_what_it_refuses_is_told(make_cluster):
    """A batch over max_batch_items or max_request_bytes (413) failed the whole job (the
    default batch of 1,000 rows of 4.2 KB bodies passes 4 MiB); a message the server refused
    was counted, not named."""
    cluster = make_cluster(extra_toml="max_batch_items = 64\nmax_request_bytes = 65536\n")
    urls = [cluster.url(i) for i in cluster.indexes]
    mapping = ColumnMapping(body_col="b", topic="bulk", deliver_after_col="a")
    now = int(time.time() * 1000)
    msgs = [mapping.to_message({"b": f"{k:04} " + "x" * 3000, "a": "1h"}, now) for k in range(300)]
    msgs.append(mapping.to_message({"b": "y" * 70_000, "a": "1h"}, now))  # over the request limit alone
    with Poster(urls, CLIENT, batch_size=1000) as poster:
        for m in msgs:
            poster.add(m)
    assert (poster.stats.accepted, poster.stats.refused) == (300, 1)
    ((message, reason),) = poster.refusals
    assert message["body"].startswith("yyy") and "refused by the server" in reason and "65536" in reason
    assert stored(cluster) == 300


def test_spark_schedule_names_what_the_server_refused_and_why_a_job_failed(spark, make_cluster, tmp_path):
    """A row the server refused went to no rejects file; a job whose tasks failed (a wrong
    token) ended in Spark's stack of Java and Python frames, not in what went wrong."""
    from horologe.pipeline.errors import JobFailedError
    from horologe.pipeline.schedule import run_schedule

    cluster = make_cluster(extra_toml="max_request_bytes = 65536\n")
    urls = [cluster.url(i) for i in cluster.indexes]
    path = tmp_path / "in.json"
    with open(path, "w") as f:
        for k, size in enumerate([10, 70_000, 10]):
            f.write(json.dumps({"body": f"{k}" * size, "after": "1h"}) + "\n")
    mapping = ColumnMapping(body_col="body", topic="orders", deliver_after_col="after")
    summary = run_schedule(spark, str(path), mapping, urls, CLIENT, str(tmp_path / "rejects"))
    assert (summary.rows, summary.accepted, summary.rejected, summary.refused) == (3, 2, 0, 1)
    (reject,) = [json.loads(line) for p in (tmp_path / "rejects").glob("*.json") for line in open(p)]
    assert json.loads(reject["row"])["body"] == "1" * 70_000
    assert reject["reason"].startswith("refused by the server: HTTP 413")
    with pytest.raises(JobFailedError, match=r"^the Spark job failed: horologe\.client\.errors\.AuthError: "):
        run_schedule(spark, str(path), mapping, urls, "not-the-token", str(tmp_path / "rejects2"))
