"""A worker keeps the leases of the tasks it holds, waiting in its prefetch or running,
for as long as it holds them: a task that waits and runs longer than the visibility
timeout runs once. Real ``celery`` and ``dramatiq`` workers, one each, on a 3-node
cluster; leases of 6 s, tasks of 3 s (Celery, four prefetched: the last starts 9 s after
its pull) and 4 s (Dramatiq, two prefetched: the second ends 8 s after its pull). A
Celery worker whose consumer loop a task holds up (the solo pool runs it there, a busy
prefork pool waits there for a process) keeps its leases too.

A lease that ended with its worker hands the task out again marked redelivered, so a
Celery worker that deduplicates finds the result and does not run it twice."""

from __future__ import annotations

import collections
import importlib
import os
import sys
import textwrap
import time

import pytest

from testkit.task_queues import (
    CELERY_PROBE_APP,
    app_module,
    celery_broker,
    dramatiq_slow_app,
    executions,
    received,
    start_celery,
    start_workers,
    stop_workers,
    wait_executed,
)
from testkit.waiting import wait_until

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

# The Celery app of the task-queue tests with a task of 5 s, acked once it has run, in a
# worker that takes its consumer loop for stuck after 2 s of silence (30 s by default), so
# that tasks of seconds show what tasks of minutes do.
CELERY_BLOCKING_APP = CELERY_PROBE_APP + textwrap.dedent(
    """
    import horologe.client.lease_keeper

    horologe.client.lease_keeper.STALE_S = 2.0


    @app.task(acks_late=True)
    def long(seq):
        _write("jsonl", {"id": seq, "start_ms": time.time() * 1000})
        time.sleep(5)
    """
)

# A task whose worker dies once its result is stored, before it acks (the main process
# SIGKILLed from the pool's child, in the task's success signal), and workers that look
# a redelivered task's result up before they run it.
CELERY_DEDUP_APP = CELERY_PROBE_APP + textwrap.dedent(
    """
    import signal
    from celery.signals import task_success

    app.conf.update(
        result_backend="file://" + os.path.join(OUT, "results"),
        worker_deduplicate_successful_tasks=True,
    )


    @app.task(acks_late=True)
    def once(seq):
        _write("jsonl", {"id": seq, "start_ms": time.time() * 1000})
        return seq


    @task_success.connect
    def die_before_the_ack(**kw):
        if os.environ.get("DIE_AFTER_SUCCESS"):
            os.kill(os.getppid(), signal.SIGKILL)
            os._exit(0)
    """
)

DRAMATIQ_APP = dramatiq_slow_app("lkd", visibility_ms=6_000, run_s=4)


def _runs(out: str) -> dict[int, int]:
    return dict(collections.Counter(r["id"] for r in executions(out)))


def test_a_celery_task_held_longer_than_its_lease_runs_once(cluster, tmp_path, monkeypatch):
    """Without the renewals the last tasks ran twice (their leases ended in the prefetch)."""
    broker = celery_broker(cluster)
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


@pytest.mark.parametrize("pool", ["solo", "prefork"])
def test_a_celery_task_that_holds_up_the_consumer_loop_longer_than_its_lease_runs_once(
    pool, cluster, tmp_path, monkeypatch
):
    """The solo pool runs a task inside the worker's consumer loop, and a prefork pool whose
    processes are all busy makes the loop wait there for one: leases of 3 s, tasks of 5 s.
    The loop was taken for stuck once silent past the stale time (here 2 s), its leases
    were no longer renewed, and the other worker ran its tasks again."""
    procs, out = start_celery(
        cluster,
        tmp_path,
        monkeypatch,
        f"bl_{pool}",
        CELERY_BLOCKING_APP,
        visibility_s=3,
        pool=pool,
        workers=2,
    )
    import horologe.client.lease_keeper as lease_keeper

    # The app sets the stale time for its workers, and importing it here would set it for
    # the tests this process runs after (their loops taken for stuck after 2 s): undone.
    monkeypatch.setattr(lease_keeper, "STALE_S", lease_keeper.STALE_S)
    try:
        app = importlib.import_module(f"bl_{pool}")
        for seq in range(3):
            app.long.delay(seq)
        wait_executed(out, 3, 40)
        time.sleep(4)  # past a lease: a copy handed out again would have started by now
    finally:
        stop_workers(procs)
    assert _runs(out) == dict.fromkeys(range(3), 1)


def test_a_celery_task_whose_worker_died_before_its_ack_is_redelivered_and_not_run_again(
    cluster, tmp_path, monkeypatch
):
    """Celery's ``worker_deduplicate_successful_tasks`` looks a task's result up only when
    its ``delivery_info["redelivered"]`` says it was handed out before: without it, the
    task whose lease ended with its worker ran a second time."""
    broker = celery_broker(cluster)
    env, out = app_module(
        cluster, tmp_path, monkeypatch, "dd_app", CELERY_DEDUP_APP, BROKER=broker, VISIBILITY_S="2"
    )
    os.makedirs(os.path.join(out, "results"))
    worker = [sys.executable, "-m", "celery", "-A", "dd_app", "worker", "--pool", "prefork", "-c", "1"]
    worker += ["--without-heartbeat", "--without-mingle", "--without-gossip", "-l", "info"]
    dying = start_workers([worker], {**env, "DIE_AFTER_SUCCESS": "1"}, str(tmp_path))
    procs = []
    try:
        import dd_app

        dd_app.once.delay(7)
        wait_executed(out, 1, 60)
        assert dying[0].wait(30) == -9  # killed before it acked: the task's lease ends with it
        (tmp_path / "next").mkdir()
        procs = start_workers([worker], env, str(tmp_path / "next"))
        wait_until(lambda: len(received(out)) >= 2, 60)  # handed out again, past the lease
        time.sleep(2)  # what the second worker does with it
    finally:
        stop_workers(dying + procs)
    assert _runs(out) == {7: 1}
    log = (tmp_path / "next" / "worker0.log").read_text()
    assert "Task already completed successfully" in log, log[-3000:]


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
