"""What the Celery and Dramatiq acceptance runs share: worker processes started as a user
starts them, the faults on the cluster while tasks wait, and the verdict over what the
tasks wrote down (one JSON line per execution, per process, appended and flushed)."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field

from testkit.process_cluster import CLIENT, Cluster
from testkit.waiting import wait_until

# A Celery app whose task ``probe(seq, retry)`` writes each run to ``<OUT>/<pid>.jsonl``
# (id, attempt, eta from the task's own eta header, start, its delivery_info's redelivered)
# and each hand-out to a worker to ``<pid>.received``; a task with ``retry`` retries once,
# 2 s after its first run. The broker URL and its lease (``visibility_timeout``, s) come
# from BROKER and VISIBILITY_S.
CELERY_PROBE_APP = textwrap.dedent(
    """
    import json, os, time
    from datetime import datetime, timezone

    from celery import Celery
    from celery.signals import task_received

    import horologe.kombu

    app = Celery("acc", broker=os.environ["BROKER"])
    app.conf.update(
        task_default_queue="acc",
        worker_enable_remote_control=False,
        worker_send_task_events=False,
        broker_connection_retry_on_startup=True,
        broker_transport_options={"visibility_timeout": int(os.environ["VISIBILITY_S"])},
        worker_timer_precision=0.01,
    )
    OUT = os.environ["OUT"]


    def _ms(eta):
        if eta is None:
            return None
        when = eta if isinstance(eta, datetime) else datetime.fromisoformat(eta)
        return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp() * 1000


    def _eta_ms(request):
        # The task's eta as Celery read it, or as the Horologe transport kept it for a
        # task it handed out once due (a worker's request, or a task's context).
        headers = getattr(request, "request_dict", None) or request.__dict__
        return _ms(request.eta or headers.get("horologe_eta"))


    def _write(name, row):
        with open(os.path.join(OUT, f"{os.getpid()}.{name}"), "a") as f:
            f.write(json.dumps(row) + "\\n")
            f.flush()


    @task_received.connect
    def received(request=None, **kw):
        eta = _eta_ms(request)
        _write("received", {"id": request.id, "received_ms": time.time() * 1000, "eta_ms": eta})


    @app.task(bind=True, max_retries=3)
    def probe(self, seq, retry):
        start = time.time() * 1000
        _write("jsonl", {"id": self.request.id, "attempt": self.request.retries, "seq": seq,
                         "eta_ms": _eta_ms(self.request), "start_ms": start,
                         "redelivered": self.request.delivery_info.get("redelivered")})
        if retry and self.request.retries == 0:
            raise self.retry(countdown=2)
    """
)


# A Dramatiq app whose actor ``slow(seq)`` of queue QUEUE writes each run to
# ``<OUT>/<pid>.jsonl`` (id, start) and takes RUN_S seconds; leases of VISIBILITY_MS.
_DRAMATIQ_SLOW_APP = textwrap.dedent(
    """
    import json, os, time

    import dramatiq
    from horologe.dramatiq import HorologeBroker

    broker = HorologeBroker(os.environ["NODES"].split(","), os.environ["HOROLOGE_CLIENT_TOKEN"],
                            visibility_ms=VISIBILITY_MS)
    dramatiq.set_broker(broker)


    @dramatiq.actor(queue_name="QUEUE", max_retries=0)
    def slow(seq):
        with open(os.path.join(os.environ["OUT"], f"{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps({"id": seq, "start_ms": time.time() * 1000}) + "\\n")
        time.sleep(RUN_S)
    """
)


def dramatiq_slow_app(queue: str, visibility_ms: int, run_s: float) -> str:
    """The source of a Dramatiq app on the cluster (``NODES``, ``HOROLOGE_CLIENT_TOKEN``)
    whose actor ``slow(seq)`` of ``queue`` writes each run down (id, start) and takes
    ``run_s``; leases of ``visibility_ms``."""
    return (
        _DRAMATIQ_SLOW_APP.replace("VISIBILITY_MS", str(visibility_ms))
        .replace("QUEUE", queue)
        .replace("RUN_S", repr(run_s))
    )


def app_module(
    cluster: Cluster, tmp_path, monkeypatch, name: str, source: str, **settings: str
) -> tuple[dict, str]:
    """Module ``name`` written from ``source`` and importable here, where the test sends;
    the workers' environment (the nodes, the token, where tasks write, ``settings``), set
    here too; and the directory the tasks write to."""
    env = {
        "HOROLOGE_CLIENT_TOKEN": CLIENT,
        "NODES": ",".join(cluster.url(i) for i in cluster.indexes),
        **settings,
    }
    worker_env, out = write_app(str(tmp_path), name, source, env)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("OUT", out)
    monkeypatch.syspath_prepend(os.path.join(str(tmp_path), "app"))
    return worker_env, out


def write_app(root: str, name: str, source: str, env: dict[str, str]) -> tuple[dict, str]:
    """``<root>/app/<name>.py`` from ``source``, and ``<root>/out`` for what its tasks
    write; the workers' environment: this one, ``env``, ``OUT`` and the app on the path."""
    app_dir, out = os.path.join(root, "app"), os.path.join(root, "out")
    os.makedirs(app_dir)
    os.makedirs(out)
    with open(os.path.join(app_dir, f"{name}.py"), "w") as f:
        f.write(source)
    path = os.pathsep.join([app_dir, *sys.path])
    return {**os.environ, **env, "OUT": out, "PYTHONPATH": path}, out


def celery_broker(cluster: Cluster) -> str:
    """The broker URL of a Celery app on ``cluster``: ``horologe://`` and every node."""
    return "horologe://" + ",".join(cluster.url(i).removeprefix("http://") for i in cluster.indexes)


def start_celery(
    cluster: Cluster,
    tmp_path,
    monkeypatch,
    name: str,
    source: str,
    *,
    visibility_s: int,
    pool="prefork",
    workers=1,
) -> tuple[list[subprocess.Popen], str]:
    """The Celery app ``name`` written from ``source`` (:func:`app_module`, ``BROKER`` the
    cluster, ``VISIBILITY_S``), and ``workers`` ``celery worker`` processes of it, each of
    one ``pool`` process or thread, logging to ``worker<k>.log`` in ``tmp_path``: the
    processes, and the directory the tasks write to."""
    broker = celery_broker(cluster)
    env, out = app_module(
        cluster, tmp_path, monkeypatch, name, source, BROKER=broker, VISIBILITY_S=str(visibility_s)
    )
    worker = [sys.executable, "-m", "celery", "-A", name, "worker", "--pool", pool, "-c", "1", "-l", "info"]
    worker += ["--without-heartbeat", "--without-mingle", "--without-gossip"]
    return start_workers([[*worker, "-n", f"w{k}@%h"] for k in range(workers)], env, str(tmp_path)), out


def start_workers(commands: list[list[str]], env: dict, log_dir: str) -> list[subprocess.Popen]:
    procs = []
    for k, cmd in enumerate(commands):
        log = open(os.path.join(log_dir, f"worker{k}.log"), "wb")  # noqa: SIM115 - kept for the process
        procs.append(
            subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        )
    return procs


def tree_rss_kb(pid: int) -> dict[int, int]:
    """The resident memory of process ``pid`` and of each of its descendants (a prefork
    pool, Dramatiq's worker processes), KiB by pid."""
    rss = {}
    for p in [pid, *_children(pid)]:
        try:
            with open(f"/proc/{p}/status") as f:
                rss[p] = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass  # gone meanwhile
    return rss


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(k) for k in f.read().split()]
    except OSError:
        return []
    return kids + [g for k in kids for g in _children(k)]


def stop_workers(procs: list[subprocess.Popen]) -> None:
    """A warm shutdown: SIGTERM to each worker's main process, as Celery and Dramatiq
    document it (what they hold unstarted is given back); they stop their own child
    processes. SIGTERM to the whole process group instead could kill a prefork child while
    it held the pool's queue lock, and the main process then waited on that lock for good
    (billiard's ``TaskHandler.tell_others``). A worker still up after 30 s is killed with
    its children."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def faults(cluster: Cluster, at_s: tuple[float, float]) -> threading.Thread:
    """A forced release of the master at ``at_s[0]``, a SIGKILL of the (new) master at
    ``at_s[1]``, restarted 3 s later: while tasks wait and while they fall due."""

    def run() -> None:
        t0 = time.monotonic()
        time.sleep(at_s[0])
        old = cluster.wait_leader()
        cluster.client(old).release_master()
        time.sleep(max(0.0, at_s[1] - (time.monotonic() - t0)))
        master = cluster.wait_leader()
        cluster.signal(master, signal.SIGKILL)
        time.sleep(3)
        cluster.start(master)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def dead_lettered(client, queue: str, n: int, timeout_s: float = 10) -> list:
    """The first ``n`` messages of the queue's dead-letter queue (``%DLQ%<queue>``), pulled
    (and leased) as they come; TimeoutError if fewer come within ``timeout_s``."""
    dead: list = []

    def all_there() -> bool:
        """the messages in the dead-letter queue"""
        dead.extend(client.pull(f"%DLQ%{queue}", queue, max=n - len(dead), wait_ms=500))
        return len(dead) >= n

    wait_until(all_there, timeout_s)
    return dead


def executions(out_dir: str) -> list[dict]:
    """One row per execution: what each task wrote to ``<pid>.jsonl``."""
    return _rows(out_dir, "*.jsonl")


def received(out_dir: str) -> list[dict]:
    """One row per hand-out to a Celery worker (its ``task_received`` signal):
    ``received_ms`` and the task's ``eta_ms`` (None: it has none)."""
    return _rows(out_dir, "*.received")


def held_early(out_dir: str, by_ms: float = 50) -> list[dict]:
    """The hand-outs received more than ``by_ms`` before their task's eta."""
    return [r for r in received(out_dir) if r["eta_ms"] and r["received_ms"] < r["eta_ms"] - by_ms]


def _rows(out_dir: str, pattern: str) -> list[dict]:
    rows = []
    for path in glob.glob(os.path.join(out_dir, pattern)):
        with open(path) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


@dataclass
class Verdict:
    twice: list = field(default_factory=list)  # (id, attempt) executed more than once
    lost: list = field(default_factory=list)  # produced, never executed
    early: list = field(default_factory=list)  # started before its eta
    lateness_ms: list = field(default_factory=list)  # start - eta, each execution

    def p(self, q: float) -> float:
        return percentile(sorted(self.lateness_ms), q) if self.lateness_ms else float("nan")


def percentile(xs: list[float], q: float) -> float:
    """The ``q`` quantile of ``xs``, sorted and not empty (nearest rank below)."""
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def verdict(rows: list[dict], produced: dict[tuple[str, int], int]) -> Verdict:
    """``produced``: (task id, attempt) -> eta ms, every execution expected."""
    v = Verdict()
    seen: dict[tuple[str, int], int] = {}
    for r in rows:
        key = (r["id"], r["attempt"])
        seen[key] = seen.get(key, 0) + 1
        if r["start_ms"] < r["eta_ms"]:
            v.early.append(key)
        v.lateness_ms.append(r["start_ms"] - r["eta_ms"])
    v.twice = sorted(k for k, n in seen.items() if n > 1)
    v.lost = sorted(set(produced) - set(seen))
    return v


def wait_executed(out_dir: str, n: int, timeout_s: float) -> None:
    wait_until(lambda: len(executions(out_dir)) >= n, timeout_s)
