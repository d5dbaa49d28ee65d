"""Memory per pending message: RSS of a process holding a store of 10^5 vs 10^7 pending.

    python bench/bench_storage_memory.py [--sizes 100000 10000000] [--days 30]

For each size a child process builds the store (deliver times spread over ``--days``),
then a fresh child opens it and works as a master would: maps the current and next
hour, walks every second of the current hour, reads 2,000 random messages from all
hours. Both children report their RSS. Pending messages live on disk, so the holder's
RSS should not grow with the backlog. Needs about 300 bytes of disk per message.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

HOUR0 = 491_000
H0 = HOUR0 * 3_600_000


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def build(d: str, n: int, days: int) -> dict:
    from horologe.storage import Message, Storage, StorageConfig

    rng = random.Random(1)
    body = b"b" * 200
    span = days * 86_400_000
    t0 = time.perf_counter()
    with Storage(d, StorageConfig(fsync=False)) as s:
        for ri, start in enumerate(range(0, n, 1000), 1):
            size = min(1000, n - start)
            batch = [Message("orders", body, H0 + rng.randrange(span), H0) for _ in range(size)]
            s.apply(ri, lambda tx, b=batch: tx.append(b))
        hours = len(s.hours())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"built_s": time.perf_counter() - t0, "hours": hours, "builder_peak_mb": peak}


def hold(d: str) -> dict:
    from horologe.storage import MessageId, Storage

    base = rss_mb()
    s = Storage(d)
    hours = s.hours()
    s.map_hours(hours[:2])
    walked = sum(len(s.bucket(hours[0]).chain(sec)) for sec in range(3600))
    rng = random.Random(2)
    for _ in range(2000):
        h = rng.choice(hours)
        s.read_message(MessageId(h, rng.randrange(s.bucket(h).count)))
    return {"holder_rss_mb": rss_mb(), "python_baseline_mb": base, "walked": walked}


def child(mode: str, d: str, n: int, days: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, d, str(n), str(days)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 10_000_000])
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        mode, d, n, days = args.child
        import horologe.storage  # noqa: F401 - import cost belongs to the baseline

        print(json.dumps(build(d, int(n), int(days)) if mode == "build" else hold(d)))
        return
    results = {}
    for n in args.sizes:
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as d:
            r = child("build", d, n, args.days) | child("hold", d, n, args.days)
        results[n] = r
        print(
            f"pending {n:>12,}  over {r['hours']} hours: holder RSS {r['holder_rss_mb']:7.1f} MB"
            f"  (builder peak {r['builder_peak_mb']:.1f} MB, built in {r['built_s']:.0f} s)",
            flush=True,
        )
    lo, hi = min(results), max(results)
    diff = results[hi]["holder_rss_mb"] - results[lo]["holder_rss_mb"]
    print(f"holder RSS difference {lo:,} -> {hi:,} pending: {diff:+.1f} MB")


if __name__ == "__main__":
    main()
