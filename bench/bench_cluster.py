"""Cluster figures on 3 real node processes on this machine (issue #4's table).

    python bench/bench_cluster.py [--only produce,single,lateness,hot,failover,release,crash]
                                  [--pending 10000 1000000] [--kills 7] [--seconds 10]
                                  [--load-s 120]

* produce   acknowledged produce rate, batch endpoint, 1,000 x 200 B per request
* single    single-message produce latency p50/p99
* lateness  delivery lateness p50/p99 with 2,000 msg/s falling due
* failover  SIGKILL of the master -> first delivery by the new master, ``--kills``
            rounds per ``--pending`` size of far-future backlog (no rebuild: should not grow)
* release   forced release gap over 10 releases
* hot       100,000 messages due in one second: when the last one is delivered
* crash     a follower SIGKILLed after ``--load-s`` of single produces (four producers,
            100-byte bodies, keyed), started again at once while they go on: how many
            batches its store went back (past its last sync point) and how long from its
            start until it had applied what the master had when it was killed
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import tempfile
import threading
import time

import numpy as np
import repo_root  # noqa: F401 - the repo root on sys.path, for testkit

from horologe.client import Client, HorologeError
from testkit.process_cluster import CLIENT, Cluster
from testkit.waiting import wait_until

BODY = "b" * 200


def now_ms() -> int:
    return int(time.time() * 1000)


def pct(values, q) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q))


def fresh(root: str, name: str, extra: str = "") -> Cluster:
    c = Cluster(os.path.join(root, name), 3, extra)
    c.start_all()
    return c


def post_batches(c: Cluster, master: int, msgs_fn, seconds: float, threads: int) -> int:
    acked = [0] * threads
    deadline = time.monotonic() + seconds

    def worker(k: int) -> None:
        client = c.client(master, timeout=30)
        while time.monotonic() < deadline:
            res = client.request("POST", "/v1/messages/batch", {"messages": msgs_fn()}).body
            acked[k] += sum(1 for r in res["results"] if "id" in r)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(acked)


def bench_produce(root: str, seconds: float) -> None:
    c = fresh(root, "produce")
    try:
        master = c.wait_leader()
        for threads in (1, 4):
            t0 = time.monotonic()
            n = post_batches(
                c,
                master,
                lambda: [{"topic": "bench", "body": BODY, "deliver_after": "1d"}] * 1000,
                seconds,
                threads,
            )
            rate = n / (time.monotonic() - t0)
            print(
                f"produce  batch 1,000 x 200 B, {threads} client thread(s): {rate:>10,.0f} msg/s acked",
                flush=True,
            )
    finally:
        c.stop_all()


def bench_single(root: str, count: int = 1000) -> None:
    c = fresh(root, "single")
    try:
        client = c.client(c.wait_leader())
        lat = []
        for _ in range(count):
            t0 = time.perf_counter()
            client.request("POST", "/v1/messages", {"topic": "bench", "body": BODY, "deliver_after": "1d"})
            lat.append((time.perf_counter() - t0) * 1000)
        print(
            f"single   produce latency over {count}: p50 {pct(lat, 50):.1f} ms  p99 {pct(lat, 99):.1f} ms",
            flush=True,
        )
    finally:
        c.stop_all()


def bench_lateness(root: str, rate: int = 2000, seconds: int = 10) -> None:
    c = fresh(root, "lateness")
    try:
        master = c.wait_leader()
        start = now_ms() + 15_000  # time to schedule them all first
        total = rate * seconds
        for first in range(0, total, 1000):
            c.produce(
                master,
                [
                    {"topic": "due", "body": BODY, "deliver_at": start + (k * 1000) // rate}
                    for k in range(first, min(total, first + 1000))
                ],
            )
        while now_ms() < start + seconds * 1000 + 3000:
            time.sleep(0.5)
        c.stop_all()
        with c.store(0) as s:
            rows = s.read_ready("due")
        late = rows["delivered_at_ms"] - rows["deliver_at_ms"]
        print(
            f"lateness {len(rows):,} msgs at {rate:,}/s falling due: p50 {pct(late, 50):.0f} ms"
            f"  p99 {pct(late, 99):.0f} ms  max {late.max()} ms  early {(late < 0).sum()}",
            flush=True,
        )
    finally:
        c.stop_all()


def bench_failover(root: str, pending: int, kills: int) -> float:
    """One cluster holding ``pending`` far-future messages; the master SIGKILLed ``kills`` times.

    Each round schedules a message every 10 ms, kills the master while they fall due,
    restarts it, then reads the ticks' delivered_at through a consumer group: the gap is
    the first delivery after the kill. Returns the median gap in seconds.
    """
    c = fresh(root, f"failover-{pending}")
    gaps = []
    try:
        client = Client([c.url(i) for i in c.indexes], CLIENT)
        for first in range(0, pending, 1000):  # far-future backlog, spread over 3 days
            c.produce(
                c.wait_leader(),
                [
                    {
                        "topic": "backlog",
                        "body": BODY,
                        "deliver_at": now_ms() + 86_400_000 + (k * 7919) % (3 * 86_400_000),
                    }
                    for k in range(first, min(pending, first + 1000))
                ],
            )
        for _ in range(kills):
            c.wait_connected()
            master = c.wait_leader()
            base = now_ms()
            c.produce(
                master,
                [{"topic": "tick", "body": "t", "deliver_at": base + 1_000 + 10 * k} for k in range(500)],
            )  # one every 10 ms, from +1 s to +6 s
            while now_ms() < base + 2_500:
                time.sleep(0.02)
            killed_at = now_ms()
            c.signal(master, signal.SIGKILL)
            c.wait_leader([i for i in c.indexes if i != master], exclude=master)
            while now_ms() < base + 7_000:
                time.sleep(0.1)
            c.start(master)
            delivered = []
            while True:
                batch = client.pull("tick", "bench", max=1000, wait_ms=500)
                if not batch:
                    break
                client.ack("tick", "bench", [m.receipt for m in batch])
                delivered += [m.delivered_at for m in batch]
            after = [d for d in delivered if d > killed_at]
            gaps.append((min(after) - killed_at) / 1000 if after else float("nan"))
        print(
            f"failover {pending:>9,} pending, {kills} kills: SIGKILL -> first delivery by the new master "
            f"median {pct(gaps, 50):.2f} s  max {max(gaps):.2f} s  all {[round(g, 2) for g in gaps]}",
            flush=True,
        )
        return pct(gaps, 50)
    finally:
        c.stop_all()


def bench_release(root: str, times: int = 10) -> None:
    c = fresh(root, "release")
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            try:
                c.produce(
                    c.wait_leader(),
                    [{"topic": "r", "body": BODY, "deliver_after": 300 + k} for k in range(200)],
                )
            except (HorologeError, TimeoutError):
                pass

    t = threading.Thread(target=load, daemon=True)
    t.start()
    try:
        gaps = []
        for _ in range(times):
            time.sleep(0.5)
            res = c.client(c.wait_leader()).release_master()
            gaps.append(res["gap_ms"])
        print(
            f"release  {times} forced releases under load: "
            f"gap_ms p50 {pct(gaps, 50):.0f}  max {max(gaps):.0f}"
            f"  all {gaps}",
            flush=True,
        )
    finally:
        stop.set()
        t.join(5)
        c.stop_all()


def bench_hot(root: str, count: int = 100_000) -> None:
    c = fresh(root, "hot")
    try:
        master = c.wait_leader()
        second = (now_ms() // 1000 + 40) * 1000  # a whole second, after scheduling is done
        for first in range(0, count, 1000):
            c.produce(
                master,
                [
                    {"topic": "hot", "body": "h", "deliver_at": second + (k * 7) % 1000}
                    for k in range(first, min(count, first + 1000))
                ],
            )
        assert now_ms() < second, "scheduling took longer than the lead time"
        while now_ms() < second + 5_000:
            time.sleep(0.2)
        c.stop_all()
        with c.store(0) as s:
            rows = s.read_ready("hot")
        late = rows["delivered_at_ms"] - rows["deliver_at_ms"]
        last = int(rows["delivered_at_ms"].max()) - second
        print(
            f"hot      {len(rows):,} due in one second: last delivered {last} ms after the second began;"
            f" lateness p50 {pct(late, 50):.0f} ms p99 {pct(late, 99):.0f} ms",
            flush=True,
        )
    finally:
        c.stop_all()


def bench_crash(root: str, load_s: float) -> None:
    c = fresh(root, "crash")
    try:
        master = c.wait_leader()
        victim = next(i for i in c.indexes if i != master)
        stop = threading.Event()

        def produce(k: int) -> None:
            client, n = c.client(master), 0
            while not stop.is_set():
                client.produce("bench", "b" * 100, deliver_after="1d", key=f"{k}-{n}")
                n += 1

        producers = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
        for t in producers:
            t.start()
        try:
            time.sleep(load_s)
            c.signal(victim, signal.SIGKILL)
            target = c.status(master)["applied_index"]
            t0 = time.monotonic()
            c.start(victim)

            def caught_up() -> bool:
                """the restarted follower applied what the master had at the kill"""
                return c.status(victim)["applied_index"] >= target

            wait_until(caught_up, timeout_s=600)
            took = time.monotonic() - t0
        finally:
            stop.set()
            for t in producers:
                t.join()
        back = re.findall(r"(\d+) unsynced batch\(es\)", c.log(victim))
        print(
            f"crash    follower SIGKILLed after {load_s:g} s of single produces (entry {target:,}): "
            f"went back {int(back[-1]) if back else 0:,} batches, caught up {took:.1f} s after its start",
            flush=True,
        )
    finally:
        c.stop_all()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="produce,single,lateness,hot,failover,release,crash")
    ap.add_argument("--pending", type=int, nargs="+", default=[10_000, 1_000_000])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--kills", type=int, default=7, help="failover rounds per backlog size")
    ap.add_argument("--load-s", type=float, default=120.0, help="crash: seconds of produces before the kill")
    args = ap.parse_args()
    which = set(args.only.split(","))
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as root:
        if "produce" in which:
            bench_produce(root, args.seconds)
        if "single" in which:
            bench_single(root)
        if "lateness" in which:
            bench_lateness(root)
        if "hot" in which:
            bench_hot(root)
        if "failover" in which:
            gaps = [bench_failover(root, p, args.kills) for p in args.pending]
            if len(gaps) > 1:
                print(f"failover median, largest / smallest backlog: {gaps[-1] / gaps[0]:.2f}x")
        if "release" in which:
            bench_release(root)
        if "crash" in which:
            bench_crash(root, args.load_s)


if __name__ == "__main__":
    main()
