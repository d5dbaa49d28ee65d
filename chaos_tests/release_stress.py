"""Forced releases on a CPU-starved machine: does the named node keep the mastership?

    python -m chaos_tests.release_stress [--releases 50] [--hold-s 5] [--cpu 2]

Starts three nodes as a user does (testkit's process cluster, default settings) and
``stress-ng --cpu N`` beside them (Debian's stress-ng), then asks the master to hand over
to a named node, over and over, the next node each time. After each answer it watches
for ``--hold-s`` seconds, four times a second, which node every node calls master and
which node's wheel syncs are being committed. A release counts as reversed when the
answer's ``new_master`` is not the named node, or another node is master or leads the
wheel within the hold. Prints one line per release and the totals; writes them as JSON
lines to bench/out/release-stress-<time>.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from horologe.client import HorologeError
from testkit.process_cluster import Cluster

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _masters(cluster: Cluster) -> tuple[set, dict[int, int]]:
    """Whom the nodes call master, and each node's latest committed wheel sync (ms)."""
    named, synced = set(), {}
    for i in cluster.indexes:
        try:
            st = cluster.status(i)
        except HorologeError:
            named.add(None)
            continue
        named.add(st["leader"])
        synced[i] = st["wheel"]["last_sync_led_ms"] or 0
    return named, synced


def _watch(cluster: Cluster, target: int, hold_s: float) -> str | None:
    """None if ``target`` stays the one master and the one wheel for ``hold_s``; else what was seen."""
    want = f"n{target + 1}"
    _, before = _masters(cluster)
    deadline = time.monotonic() + hold_s
    while time.monotonic() < deadline:
        time.sleep(0.25)
        named, synced = _masters(cluster)
        if named - {want, None}:
            return f"master named: {sorted(map(str, named))}"
        leading = [i for i, ms in synced.items() if ms > before.get(i, 0) and i != target]
        if leading:
            return f"wheel synced by n{leading[0] + 1}"
        before = {i: max(ms, before.get(i, 0)) for i, ms in synced.items()}
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--releases", type=int, default=50)
    ap.add_argument("--hold-s", type=float, default=5.0)
    ap.add_argument("--cpu", type=int, default=2, help="stress-ng CPU workers (0: no stress)")
    args = ap.parse_args()
    if args.cpu and shutil.which("stress-ng") is None:
        sys.exit("stress-ng is not installed: apt-get install stress-ng")
    root = os.path.join(ROOT, "bench", "out", "release-stress")
    shutil.rmtree(root, ignore_errors=True)
    out = os.path.join(ROOT, "bench", "out", f"release-stress-{time.strftime('%Y%m%dT%H%M%S')}.jsonl")
    cluster = Cluster(root, 3)
    stress = None
    reversed_ = 0
    try:
        cluster.start_all()
        master = cluster.wait_connected()
        limit_s = int(args.releases * (args.hold_s + 10) + 60)
        if args.cpu:
            cmd = ["stress-ng", "--cpu", str(args.cpu), "--timeout", f"{limit_s}s", "--quiet"]
            stress = subprocess.Popen(cmd)
        with open(out, "w") as f:
            for k in range(args.releases):
                master = cluster.wait_leader()
                target = (master + 1) % 3
                t0 = time.monotonic()
                try:
                    res = cluster.client(master, retry_s=0, timeout=30).release_master(f"n{target + 1}")
                except HorologeError as e:
                    res = {"error": str(e)}
                took = time.monotonic() - t0
                seen = None if res.get("new_master") == f"n{target + 1}" else f"answer {res}"
                seen = seen or _watch(cluster, target, args.hold_s)
                reversed_ += seen is not None
                row = {
                    "release": k + 1,
                    "to": f"n{target + 1}",
                    "answer": res,
                    "took_s": round(took, 2),
                    "reversed": seen,
                }
                f.write(json.dumps(row) + "\n")
                print(
                    f"{k + 1:3d} n{master + 1} -> n{target + 1}: gap_ms {res.get('gap_ms')}, "
                    f"answered in {took:.2f} s, {'REVERSED: ' + seen if seen else 'held'}",
                    flush=True,
                )
                if seen:
                    time.sleep(args.hold_s)  # let it settle before the next
    finally:
        if stress is not None:
            stress.terminate()
            stress.wait()
        cluster.stop_all()
        cluster.close()
    print(
        f"{reversed_} of {args.releases} releases reversed or misreported within {args.hold_s:.0f} s "
        f"(stress-ng --cpu {args.cpu}); rows in {out}"
    )
    sys.exit(1 if reversed_ else 0)


if __name__ == "__main__":
    main()
