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
import threading
import time
from dataclasses import dataclass, field

from testkit.process_cluster import CLIENT, Cluster
from testkit.waiting import wait_until


def app_module(cluster: Cluster, tmp_path, monkeypatch, name: str, source: str) -> tuple[dict, str]:
    """Module ``name`` written from ``source`` and importable here, where the test sends;
    the workers' environment (the nodes, the token, where tasks write), set here too; and
    the directory the tasks write to."""
    app_dir, out = tmp_path / "app", tmp_path / "out"
    app_dir.mkdir()
    out.mkdir()
    (app_dir / f"{name}.py").write_text(source)
    env = {
        "HOROLOGE_CLIENT_TOKEN": CLIENT,
        "NODES": ",".join(cluster.url(i) for i in cluster.indexes),
        "OUT": str(out),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(app_dir))
    return {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(app_dir), *sys.path])}, str(out)


def start_workers(commands: list[list[str]], env: dict, log_dir: str) -> list[subprocess.Popen]:
    procs = []
    for k, cmd in enumerate(commands):
        log = open(os.path.join(log_dir, f"worker{k}.log"), "wb")  # noqa: SIM115 - kept for the process
        procs.append(
            subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        )
    return procs


def stop_workers(procs: list[subprocess.Popen]) -> None:
    """A warm shutdown (SIGTERM): what they hold unstarted is given back."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
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


def executions(out_dir: str) -> list[dict]:
    rows = []
    for path in glob.glob(os.path.join(out_dir, "*.jsonl")):
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
        xs = sorted(self.lateness_ms)
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


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
