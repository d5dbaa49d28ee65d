"""SIGKILL the master again and again under load: how long until a new master delivers?

    python -m chaos_tests.failover_tail [--kills 30]

Three nodes as a user starts them (testkit's process cluster, default settings) and a
producer beside them that keeps messages falling due (a batch of 20, due 0.5 s later,
every 50 ms). Each round kills the master with SIGKILL and polls the two others every
10 ms until one of them has committed a wheel sync it proposed after the kill (its
``last_sync_led_ms``): from then on, the new master delivers. That time, measured from
the kill, is the round's figure; it includes the election, the new master's barrier and
realign, and up to one poll, and how many terms the election took (one when the first
candidate won). The killed node is restarted and caught up before the next
round. Prints every round and p50 / p99 / max; writes JSON lines to
bench/out/failover-tail-<time>.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import threading
import time

import numpy as np

from horologe.client import Client, HorologeError
from testkit.process_cluster import CLIENT, Cluster

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(cluster: Cluster, stop: threading.Event) -> None:
    client = Client([cluster.url(i) for i in cluster.indexes], CLIENT, timeout=5, retry_s=10)
    while not stop.is_set():
        due = int(time.time() * 1000) + 500
        try:
            client.produce_batch([{"topic": "tail", "body": b"x", "deliver_at": due} for _ in range(20)])
        except HorologeError:
            pass  # mid-failover past the SDK's retries: the next batch goes on
        stop.wait(0.05)


def _new_master_delivers(
    cluster: Cluster, survivors: list[int], kill_ms: int, timeout_s: float = 30
) -> tuple:
    """(ms from the kill until a survivor's post-kill sync was seen committed, that node)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for i in survivors:
            try:
                synced = cluster.status(i)["wheel"]["last_sync_led_ms"] or 0
            except HorologeError:
                continue
            if synced > kill_ms:
                return time.time() * 1000 - kill_ms, i
        time.sleep(0.01)
    raise TimeoutError(f"no new master delivered within {timeout_s} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=30)
    args = ap.parse_args()
    root = os.path.join(ROOT, "bench", "out", "failover-tail")
    shutil.rmtree(root, ignore_errors=True)
    out = os.path.join(ROOT, "bench", "out", f"failover-tail-{time.strftime('%Y%m%dT%H%M%S')}.jsonl")
    cluster = Cluster(root, 3)
    stop = threading.Event()
    loader = threading.Thread(target=_load, args=(cluster, stop), daemon=True)
    times = []
    try:
        cluster.start_all()
        cluster.wait_connected()
        loader.start()
        with open(out, "w") as f:
            for k in range(args.kills):
                master = cluster.wait_connected()
                time.sleep(2)  # steady load under this master first
                term = cluster.status(master)["term"]
                kill_ms = int(time.time() * 1000)
                cluster.signal(master, signal.SIGKILL)
                survivors = [i for i in cluster.indexes if i != master]
                took, new = _new_master_delivers(cluster, survivors, kill_ms)
                terms = cluster.status(new)["term"] - term
                times.append(took)
                row = {
                    "kill": k + 1,
                    "killed": f"n{master + 1}",
                    "new": f"n{new + 1}",
                    "ms": took,
                    "terms": terms,
                }
                f.write(json.dumps(row) + "\n")
                print(f"{k + 1:3d} killed n{master + 1}: n{new + 1} after {took:.0f} ms, {terms} term(s) on")
                cluster.start(master)
                cluster.catch_up(master, behind=50)
    finally:
        stop.set()
        if loader.is_alive():
            loader.join()
        cluster.stop_all()
        cluster.close()
    p50, p99 = np.percentile(times, [50, 99])
    print(f"{len(times)} kills: p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {max(times):.0f} ms; rows in {out}")
    sys.exit(0 if len(times) == args.kills else 1)


if __name__ == "__main__":
    main()
