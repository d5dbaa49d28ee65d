"""A worker stopped as Celery and Dramatiq document it (SIGTERM to its main process) while
it holds tasks it has not started: every task runs once, and what the stopped worker held
unstarted reaches the next worker at once, not when its lease ends. Leases of 120 s, so a
task left leased to the stopped worker would not run within the test's wait (90 s).

Celery's prefork pool runs what it has reserved before it stops; what it holds unstarted
at its close is what a rate limit keeps waiting (4 a second, 8 prefetched). Dramatiq
gives back what waits in its work queue."""

from __future__ import annotations

import collections
import importlib
import signal
import subprocess
import sys
import textwrap
import time

from testkit.task_queues import (
    CELERY_PROBE_APP,
    app_module,
    celery_broker,
    dramatiq_slow_app,
    executions,
    start_workers,
    stop_workers,
    wait_executed,
)

N = 40

CELERY_APP = CELERY_PROBE_APP + textwrap.dedent(
    """

    @app.task(rate_limit="4/s")
    def limited(seq):
        _write("jsonl", {"id": seq, "start_ms": time.time() * 1000})
        time.sleep(0.3)
    """
)


def _stop_one_then_start_another(worker: list[str], env: dict, tmp_path, out: str, send) -> None:
    """``worker`` started, ``N`` tasks sent by ``send(seq)``; once 4 ran, the worker
    stopped warm and another started; all ``N`` run within 90 s of that."""
    first = start_workers([worker], env, str(tmp_path))
    procs: list[subprocess.Popen] = []
    try:
        for seq in range(N):
            send(seq)
        wait_executed(out, 4, 30)
        t0 = time.monotonic()
        first[0].send_signal(signal.SIGTERM)
        assert first[0].wait(30) == 0
        print(f"stopped in {time.monotonic() - t0:.1f} s after {len(executions(out))} runs")
        (tmp_path / "next").mkdir()
        procs = start_workers([worker], env, str(tmp_path / "next"))
        wait_executed(out, N, 90)
        time.sleep(2)  # anything run twice would show by now
    finally:
        stop_workers(first + procs)
    assert dict(collections.Counter(r["id"] for r in executions(out))) == dict.fromkeys(range(N), 1)


def test_a_celery_worker_stopped_warm_gives_back_the_tasks_its_rate_limit_held(
    cluster, tmp_path, monkeypatch
):
    broker = celery_broker(cluster)
    env, out = app_module(
        cluster, tmp_path, monkeypatch, "ws_cel", CELERY_APP, BROKER=broker, VISIBILITY_S="120"
    )
    worker = [sys.executable, "-m", "celery", "-A", "ws_cel", "worker", "--pool", "prefork", "-c", "2"]
    worker += ["--without-heartbeat", "--without-mingle", "--without-gossip", "-l", "info"]
    app = importlib.import_module("ws_cel")
    _stop_one_then_start_another(worker, env, tmp_path, out, app.limited.delay)


def test_a_dramatiq_worker_stopped_warm_gives_back_the_messages_it_held(cluster, tmp_path, monkeypatch):
    env, out = app_module(cluster, tmp_path, monkeypatch, "ws_dram", dramatiq_slow_app("wsd", 120_000, 0.3))
    worker = [sys.executable, "-m", "dramatiq", "ws_dram", "--processes", "1", "--threads", "2"]
    app = importlib.import_module("ws_dram")
    _stop_one_then_start_another(worker, env, tmp_path, out, app.slow.send)
