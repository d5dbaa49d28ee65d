"""A worker keeps the leases of the tasks it holds, waiting in its prefetch or running,
for as long as it holds them: a task that waits and runs longer than the visibility
timeout runs once. Real ``celery`` and ``dramatiq`` workers, one each, on a 3-node
cluster; leases of 6 s, tasks of 3 s (Celery, four prefetched: the last starts 9 s after
its pull) and 4 s (Dramatiq, two prefetched: the second ends 8 s after its pull)."""

from __future__ import annotations

import collections
import sys
import textwrap
import time

from testkit.task_queues import (
    CELERY_PROBE_APP,
    app_module,
    executions,
    start_workers,
    stop_workers,
    wait_executed,
)

N = 4

# The Celery app of the task-queue tests, with a slow task acked once it has run.
CELERY_APP = CELERY_PROBE_APP + textwrap.dedent(
    """

    @app.task(acks_late=True)
    def slow(seq):
        _write("jsonl", {"id": seq, "start_ms": time.time() * 1000})
        time.sleep(3)
    """
)

DRAMATIQ_APP = textwrap.dedent(
    """
    import json, os, time

    import dramatiq
    from horologe.dramatiq import HorologeBroker

    broker = HorologeBroker(os.environ["NODES"].split(","), os.environ["HOROLOGE_CLIENT_TOKEN"],
                            visibility_ms=6_000)
    dramatiq.set_broker(broker)


    @dramatiq.actor(queue_name="lkd", max_retries=0)
    def slow(seq):
        with open(os.path.join(os.environ["OUT"], f"{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps({"id": seq, "start_ms": time.time() * 1000}) + "\\n")
        time.sleep(4)
    """
)


def _runs(out: str) -> dict[int, int]:
    return dict(collections.Counter(r["id"] for r in executions(out)))


def test_a_celery_task_held_longer_than_its_lease_runs_once(cluster, tmp_path, monkeypatch):
    """Without the renewals the last tasks ran twice (their leases ended in the prefetch)."""
    broker = "horologe://" + ",".join(cluster.url(i).removeprefix("http://") for i in cluster.indexes)
    env, out = app_module(
        cluster, tmp_path, monkeypatch, "lk_app", CELERY_APP, BROKER=broker, VISIBILITY_S="6"
    )
    worker = [sys.executable, "-m", "celery", "-A", "lk_app", "worker", "--pool", "prefork", "-c", "1"]
    procs = start_workers(
        [[*worker, "--without-heartbeat", "--without-mingle", "--without-gossip"]], env, str(tmp_path)
    )
    try:
        import lk_app

        for seq in range(N):
            lk_app.slow.delay(seq)
        wait_executed(out, N, 60)
        time.sleep(7)  # past a lease: a copy handed out again would have started by now
    finally:
        stop_workers(procs)
    assert _runs(out) == dict.fromkeys(range(N), 1)


def test_a_dramatiq_message_held_longer_than_its_lease_runs_once(cluster, tmp_path, monkeypatch):
    """Without the renewals a message held 8 s on a 6 s lease was pulled again and ran twice."""
    env, out = app_module(cluster, tmp_path, monkeypatch, "lk_dram", DRAMATIQ_APP)
    worker = [sys.executable, "-m", "dramatiq", "lk_dram", "--processes", "1", "--threads", "1"]
    procs = start_workers([worker], env, str(tmp_path))
    try:
        import lk_dram

        for seq in range(N):
            lk_dram.slow.send(seq)
        wait_executed(out, N, 60)
        time.sleep(7)
    finally:
        stop_workers(procs)
    assert _runs(out) == dict.fromkeys(range(N), 1)
