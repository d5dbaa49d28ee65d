"""The task-queue acceptance at full size: Celery and Dramatiq on Horologe, with faults, next
to the same runs on Redis (the negative control).

\b
python -m bench.task_queues                       # both queues, both brokers (make task-queues)
python -m bench.task_queues --queue celery --tasks 2000 --max-countdown 40   # a short try

Per queue and broker: a fresh broker (Horologe: 3 nodes as a user starts them; Redis:
Debian's ``redis-server``), two workers as a user starts them (``celery -A app worker``,
prefork, concurrency 4, default early ack and prefetch; ``dramatiq app``, one process of 4
threads each), and ``--tasks`` tasks sent from here: countdowns 10 s to ``--max-countdown``,
a fifth of them in two hot seconds, 5 % with a sub-second eta, 2 % retried once 2 s after
their first run (Celery: ``self.retry(countdown=2)``; Dramatiq: the actor sends itself again
with a 2 s delay). On Horologe, while they wait: a forced release of the master, a SIGKILL
of the master (restarted 10 s later), and a release inside the second hot second. On Redis:
no fault; Celery's ``visibility_timeout`` is 60 s there, as the kombu docs show it.

Each task writes one line per run: its id, attempt, eta and start (ms). The verdict: run
twice, never run, started before its eta, handed to a worker more than 50 ms before its
eta (Celery's ``task_received``), lateness ``start - eta`` inside and outside the fault
windows (15 s from each fault's start) and of the hot seconds apart, the workers' RSS
(prefork children included) while the tasks wait, and on Horologe the tasks pending in
the cluster once sent against those sent. ``--out`` gets TASK_QUEUES.md and
task_queues.json. Exits 1 when a Horologe run fails a check; the Redis runs are expected
to fail theirs.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

import click

from horologe.client import Client
from horologe.client.task_keys import topic_name
from testkit.process_cluster import CLIENT, Cluster
from testkit.task_queues import (
    CELERY_PROBE_APP,
    executions,
    held_early,
    percentile,
    start_workers,
    stop_workers,
    tree_rss_kb,
    verdict,
    write_app,
)

from .edge.redis_system import RedisSystem

QUEUE = "acc"
REDIS_VISIBILITY_S = 60
FAULT_SPAN_S = 15  # lateness within this long after a fault starts counts as inside it
RSS_EVERY_S = 2.0

DRAMATIQ_APP = textwrap.dedent(
    """
    import json, os, time

    import dramatiq

    if os.environ["BROKER_KIND"] == "horologe":
        from horologe.dramatiq import HorologeBroker
        broker = HorologeBroker(os.environ["NODES"].split(","), os.environ["HOROLOGE_CLIENT_TOKEN"])
    else:
        from dramatiq.brokers.redis import RedisBroker
        broker = RedisBroker(url=os.environ["BROKER"])
    dramatiq.set_broker(broker)


    @dramatiq.actor(queue_name="acc", max_retries=0)
    def probe(seq, eta_ms, attempt, retry):
        start = time.time() * 1000
        with open(os.path.join(os.environ["OUT"], f"{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps({"id": str(seq), "attempt": attempt, "seq": seq, "eta_ms": eta_ms,
                                "start_ms": start}) + "\\n")
            f.flush()
        if retry and attempt == 0:
            again = time.time() * 1000 + 2000
            probe.send_with_options(args=(seq, again, 1, False), delay=2000)
    """
)


@dataclass
class Plan:
    """What is sent: per task, when it is due (``at``: epoch ms; else ``after``: ms after
    it is sent), and whether it retries once."""

    due: list[tuple[str, float]]
    retries: list[bool]
    hot_ms: tuple[int, int]

    def eta(self, k: int, now_ms: float) -> float:
        kind, value = self.due[k]
        return value if kind == "at" else now_ms + value


def plan(n: int, max_countdown_s: float, start_ms: float, rng: random.Random) -> Plan:
    span_ms = max_countdown_s * 1000
    hot = (int(start_ms + 0.45 * span_ms), int(start_ms + 0.8 * span_ms))
    due, retries = [], []
    for k in range(n):
        draw = rng.random()
        if draw < 0.2:
            due.append(("at", float(hot[k % 2])))  # the two hot seconds: all in their first ms
        elif draw < 0.25:
            due.append(("after", rng.uniform(50, 950)))  # a sub-second eta
        else:
            due.append(("after", rng.uniform(10_000, span_ms)))  # a countdown
        retries.append(rng.random() < 0.02)
    return Plan(due, retries, hot)


@dataclass
class Run:
    queue: str
    broker: str
    sent: int = 0
    expected: dict = field(default_factory=dict)  # (id, attempt) -> eta ms (None: set by the worker)
    faults: list = field(default_factory=list)  # (name, start ms)
    rss_kb: list = field(default_factory=list)  # (ms, per worker: pid -> KiB)
    pending: dict | None = None  # Horologe: {"sent": n, "held": n} for the tasks due later
    send_s: float = 0.0


def _send_celery(app_module, p: Plan, run: Run) -> None:
    for seq, retry in enumerate(p.retries):
        at = p.eta(seq, time.time() * 1000)
        task = app_module.probe.apply_async((seq, retry), eta=datetime.fromtimestamp(at / 1000, UTC))
        run.expected[(task.id, 0)] = at
        if retry:
            run.expected[(task.id, 1)] = None


def _send_dramatiq(app_module, p: Plan, run: Run) -> None:
    for seq, retry in enumerate(p.retries):
        now = time.time() * 1000
        delay = math.ceil(max(0.0, p.eta(seq, now) - now))  # whole ms, as Dramatiq sends it
        app_module.probe.send_with_options(args=(seq, now + delay, 0, retry), delay=delay)
        run.expected[(str(seq), 0)] = now + delay
        if retry:
            run.expected[(str(seq), 1)] = None


def _faults(
    cluster: Cluster, t0_ms: float, hot2_ms: int, run: Run, stop: threading.Event
) -> threading.Thread:
    """A release 15 s in, a SIGKILL of the master 45 s in (restarted 10 s later), a release
    300 ms into the second hot second."""

    def at(ms: float) -> bool:
        return not stop.wait(max(0.0, (ms - time.time() * 1000) / 1000))

    def release(name: str) -> None:
        run.faults.append((name, time.time() * 1000))
        master = cluster.wait_leader()
        cluster.client(master, retry_s=10, timeout=20).release_master()

    def go() -> None:
        if at(t0_ms + 15_000):
            release("release")
        if at(t0_ms + 45_000):
            master = cluster.wait_leader()
            run.faults.append((f"SIGKILL n{master + 1}", time.time() * 1000))
            cluster.signal(master, signal.SIGKILL)
            if at(time.time() * 1000 + 10_000):
                cluster.start(master)
        if at(hot2_ms + 300):
            release("release in the hot second")

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread


def _pending(urls: list[str], topic: str, after_ms: float, end_ms: float) -> int:
    """How many messages ``topic`` holds pending with a deliver time in ``[after_ms, end_ms)``."""
    client = Client(urls, CLIENT, retry_s=15)
    try:
        count, cursor = 0, None
        while True:
            page = client.pending(topic, int(after_ms), int(end_ms), limit=1000, cursor=cursor)
            count += len(page.messages)
            cursor = page.next_cursor
            if not cursor:
                return count
    finally:
        client.close()


def run_one(queue: str, broker: str, n: int, max_countdown_s: float, seed: int, root: str) -> dict:
    print(f"{queue} on {broker}: {n} tasks, countdowns up to {max_countdown_s:.0f} s", flush=True)
    run = Run(queue, broker)
    work = os.path.join(root, f"{queue}-{broker}")
    os.makedirs(work)
    cluster = redis = None
    if broker == "horologe":
        cluster = Cluster(os.path.join(work, "cluster"), 3)
        cluster.start_all()
        cluster.wait_connected()
        urls = [cluster.url(i) for i in cluster.indexes]
        env = {
            "BROKER_KIND": "horologe",
            "BROKER": "horologe://" + ",".join(u.removeprefix("http://") for u in urls),
            "NODES": ",".join(urls),
            "HOROLOGE_CLIENT_TOKEN": CLIENT,
            "VISIBILITY_S": "1800",
        }
    else:
        redis = RedisSystem(os.path.join(work, "redis"))
        redis.start()
        env = {"BROKER_KIND": "redis", "BROKER": f"redis://127.0.0.1:{redis.port}/0"}
        env["VISIBILITY_S"] = str(REDIS_VISIBILITY_S)
    name = f"acc_{queue}_{broker}"
    worker_env, out = write_app(work, name, CELERY_PROBE_APP if queue == "celery" else DRAMATIQ_APP, env)
    if queue == "celery":
        cmd = [sys.executable, "-m", "celery", "-A", name, "worker", "--pool", "prefork", "-c", "4"]
        cmd += ["--without-heartbeat", "--without-mingle", "--without-gossip", "-l", "warning"]
        commands = [[*cmd, "-n", f"w{k}@%h"] for k in range(2)]
    else:
        cmd = [sys.executable, "-m", "dramatiq", name, "--processes", "1", "--threads", "4"]
        commands = [cmd, cmd]
    os.environ.update({**env, "OUT": out})
    sys.path.insert(0, os.path.join(work, "app"))
    workers = start_workers(commands, worker_env, work)
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_rss, args=(workers, run, stop), daemon=True)
    sampler.start()
    chaos = None
    try:
        module = __import__(name)
        t0 = time.time() * 1000
        p = plan(n, max_countdown_s, t0, random.Random(seed))
        if cluster is not None:
            chaos = _faults(cluster, t0, p.hot_ms[1], run, stop)
        (_send_celery if queue == "celery" else _send_dramatiq)(module, p, run)
        run.sent = n
        run.send_s = (time.time() * 1000 - t0) / 1000
        print(f"  sent in {run.send_s:.1f} s", flush=True)
        if cluster is not None:  # what is due 5 s from now on, and whether the cluster holds it all
            after = time.time() * 1000 + 5_000
            wanted = sum(1 for (_, a), eta in run.expected.items() if a == 0 and eta >= after)
            run.pending = {"sent": wanted}
        last_eta = max(eta for eta in run.expected.values() if eta is not None)
        if cluster is not None:
            run.pending["held"] = _pending(urls, topic_name(QUEUE), after, math.ceil(last_eta) + 1)
        deadline = last_eta + 60_000
        while time.time() * 1000 < deadline and not _all_ran(out, run):
            time.sleep(1)
        time.sleep(5)  # a run twice shows by now
    finally:
        stop.set()
        stop_workers(workers)
        if chaos is not None:
            chaos.join(30)
        sampler.join(10)
        if cluster is not None:
            cluster.stop_all()
            cluster.close()
        if redis is not None:
            redis.stop()
        sys.path.remove(os.path.join(work, "app"))
    return _result(run, out, p)


def _all_ran(out: str, run: Run) -> bool:
    return {(r["id"], r["attempt"]) for r in executions(out)} >= set(run.expected)


def _sample_rss(workers, run: Run, stop: threading.Event) -> None:
    while not stop.wait(RSS_EVERY_S):
        run.rss_kb.append((time.time() * 1000, [tree_rss_kb(w.pid) for w in workers]))


def _result(run: Run, out: str, p: Plan) -> dict:
    rows = executions(out)
    etas = {(r["id"], r["attempt"]): r["eta_ms"] for r in rows}
    expected = {k: (eta if eta is not None else etas.get(k, 0)) for k, eta in run.expected.items()}
    v = verdict(rows, expected)
    windows = [(start, start + FAULT_SPAN_S * 1000) for _, start in run.faults]

    def late(rows: list[dict]) -> list[float]:
        return [r["start_ms"] - r["eta_ms"] for r in rows]

    def in_hot(r: dict) -> bool:  # due in a hot second's first ms (Dramatiq: a whole ms later)
        return any(h <= r["eta_ms"] < h + 2 for h in p.hot_ms)

    hot = [r for r in rows if in_hot(r)]
    rest = [r for r in rows if not in_hot(r)]
    inside = [r for r in rest if any(a <= r["eta_ms"] < b for a, b in windows)]
    outside = [r for r in rest if not any(a <= r["eta_ms"] < b for a, b in windows)]
    waiting = [kb for at, kb in run.rss_kb if at < min(p.hot_ms)]  # before the first hot second
    result = {
        "queue": run.queue,
        "broker": run.broker,
        "tasks": run.sent,
        "executions expected": len(expected),
        "executions": len(rows),
        "run twice": len(v.twice),
        "never run": len(v.lost),
        "started early": len(v.early),
        "handed out > 50 ms early": len(held_early(out, 50)) if run.queue == "celery" else None,
        "lateness outside faults ms": _percentiles(late(outside)),
        "lateness inside faults ms": _percentiles(late(inside)),
        "lateness in the hot seconds ms": _percentiles(late(hot)),
        "faults": [name for name, _ in run.faults],
        "worker RSS MB (first, peak while waiting)": _rss(waiting),  # its process that grew most
        "pending in the cluster once sent": run.pending,
        "send s": round(run.send_s, 1),
    }
    checks = [v.twice, v.lost, v.early] + ([held_early(out, 50)] if run.queue == "celery" else [])
    held_all = run.pending is None or run.pending["held"] == run.pending["sent"]
    result["pass"] = not any(checks) and held_all
    starts = {(r["id"], r["attempt"]): r for r in rows}
    result["first violations"] = {
        "never run (id, attempt, eta ms)": [[*k, expected[k]] for k in v.lost[:10]],
        "early (id, attempt, eta ms, start ms)": [
            [*k, starts[k]["eta_ms"], starts[k]["start_ms"]] for k in v.early[:10]
        ],
        "run twice (id, attempt)": v.twice[:10],
    }
    print(f"  {'pass' if result['pass'] else 'FAIL'}: {json.dumps(result)}", flush=True)
    return result


def _percentiles(xs: list[float]) -> dict | None:
    if not xs:
        return None
    xs = sorted(xs)
    return {
        "n": len(xs),
        "p50": round(percentile(xs, 0.5), 1),
        "p99": round(percentile(xs, 0.99), 1),
        "max": round(xs[-1], 1),
    }


def _rss(samples: list[list[dict[int, int]]]) -> list[tuple[float, float]]:
    """Per worker, its process that grew most: (first, peak) MB. The one that grows is
    the one holding tasks (Celery's main process, Dramatiq's worker process)."""
    out = []
    for k in range(len(samples[0]) if samples else 0):
        first: dict[int, int] = {}
        peak: dict[int, int] = {}
        for sample in samples:
            for pid, kb in sample[k].items():
                first.setdefault(pid, kb)
                peak[pid] = max(peak.get(pid, 0), kb)
        pid = max(first, key=lambda p: peak[p] - first[p])
        out.append((round(first[pid] / 1024, 1), round(peak[pid] / 1024, 1)))
    return out


def _report(results: list[dict], out_dir: str, args: dict) -> str:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "task_queues.json"), "w") as f:
        json.dump({"args": args, "results": results}, f, indent=1)
    lines = [
        "# Task queues on Horologe and on Redis",
        "",
        f"`python -m bench.task_queues {args['cli']}`, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
        "",
        "| queue | broker | executions | run twice | never run | early | handed out > 50 ms early "
        "| lateness outside faults p50 / p99 / max ms (n) | inside faults | the hot seconds "
        "| worker RSS MB first → peak while waiting (its process that grew most) "
        "| pending once sent | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['queue']} | {r['broker']} | {r['executions']} of {r['executions expected']} "
            f"| {r['run twice']} | {r['never run']} | {r['started early']} "
            f"| {'–' if r['handed out > 50 ms early'] is None else r['handed out > 50 ms early']} "
            f"| {_cell(r['lateness outside faults ms'])} | {_cell(r['lateness inside faults ms'])} "
            f"| {_cell(r['lateness in the hot seconds ms'])} "
            f"| {', '.join(f'{a} → {b}' for a, b in r['worker RSS MB (first, peak while waiting)'])} "
            f"| {_held(r['pending in the cluster once sent'])} | {'pass' if r['pass'] else 'fail'} |"
        )
    path = os.path.join(out_dir, "TASK_QUEUES.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def _cell(p: dict | None) -> str:
    return "–" if p is None else f"{p['p50']} / {p['p99']} / {p['max']} ({p['n']})"


def _held(p: dict | None) -> str:
    return "–" if p is None else f"{p['held']} of {p['sent']}"


@click.command(help=__doc__, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--queue", "queues", multiple=True, type=click.Choice(["celery", "dramatiq"]), help="Default: both."
)
@click.option(
    "--broker", "brokers", multiple=True, type=click.Choice(["horologe", "redis"]), help="Default: both."
)
@click.option("--tasks", default=10_000, show_default=True, help="Tasks sent per run.")
@click.option(
    "--max-countdown", default=130.0, show_default=True, help="The latest countdown, s (at least 60)."
)
@click.option("--seed", default=1, show_default=True, help="Seed of the tasks' times and retries.")
@click.option("--out", "out_dir", default="task-queues-report", show_default=True)
def main(queues, brokers, tasks: int, max_countdown: float, seed: int, out_dir: str) -> None:
    if max_countdown < 60:
        raise click.BadParameter(
            "at least 60 s: the faults run 15 s and 45 s in", param_hint="--max-countdown"
        )
    for tool in ("redis-server",):
        if "redis" in (brokers or ("redis",)) and shutil.which(tool) is None:
            raise click.UsageError(f"{tool} is not installed (make task-queues installs it)")
    root = tempfile.mkdtemp(prefix="horologe-task-queues-")
    results = []
    try:
        for queue in queues or ("celery", "dramatiq"):
            for broker in brokers or ("horologe", "redis"):
                results.append(run_one(queue, broker, tasks, max_countdown, seed, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    cli = " ".join(sys.argv[1:])
    print(f"report: {_report(results, out_dir, {'cli': cli, 'tasks': tasks, 'seed': seed})}")
    failed = [
        f"{r['queue']} on {r['broker']}" for r in results if r["broker"] == "horologe" and not r["pass"]
    ]
    if failed:
        print(f"failed: {', '.join(failed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
