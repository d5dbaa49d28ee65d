"""The key index: memory, disk and look-ups with N keyed messages stored (default 10^6).

    python bench/bench_keys.py [--keys 1000000] [--lookups 100000]

A child process stores N messages (100-byte bodies, deliver times over 30 days, batches
of 1,000 as the master's group commit makes them) with a key each; another stores the
same messages without keys. Each reports the time per message and its RSS. Then a fresh
child opens the keyed store and looks keys up: hits (each one checked against its
message's record) and misses, with the RSS and the Python heap (tracemalloc, numpy
arrays included) that holding the index costs. Disk: bytes under keys/ per key.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from bench_storage_memory import H0, rss_mb  # bench/ is on the path: run as python bench/x.py

SPAN_MS = 30 * 86_400_000


def build(d: str, n: int, keyed: bool) -> dict:
    from horologe.storage import Message, Storage, StorageConfig

    rng = random.Random(1)
    body = b"b" * 100
    base = rss_mb()
    t0 = time.perf_counter()
    with Storage(d, StorageConfig(fsync=False)) as s:
        for ri, start in enumerate(range(0, n, 1000), 1):
            batch = [
                Message("orders", body, H0 + rng.randrange(SPAN_MS), H0, key=f"order-{k}" if keyed else None)
                for k in range(start, min(n, start + 1000))
            ]
            s.apply(ri, lambda tx, b=batch: tx.append(b))
        rss = rss_mb()
    return {"us_per_msg": (time.perf_counter() - t0) / n * 1e6, "rss_mb": rss, "baseline_mb": base}


def hold(d: str, n: int, lookups: int) -> dict:
    import tracemalloc

    from horologe.storage import Storage

    base = rss_mb()
    rng = random.Random(2)
    with Storage(d) as s:
        hits = [f"order-{rng.randrange(n)}" for _ in range(lookups)]
        t0 = time.perf_counter()
        assert all(s.lookup_key("orders", k) is not None for k in hits)
        hit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        assert all(s.lookup_key("orders", f"never-{k}") is None for k in range(lookups))
        miss_s = time.perf_counter() - t0
        rss = rss_mb()
        live = s.key_index.live
    tracemalloc.start()  # apart: tracing slows every allocation
    with Storage(d) as s:
        assert all(s.lookup_key("orders", k) is not None for k in hits[:1000])
        _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    keys_bytes = sum(os.path.getsize(os.path.join(d, "keys", f)) for f in os.listdir(os.path.join(d, "keys")))
    return {
        "hits_per_s": lookups / hit_s,
        "misses_per_s": lookups / miss_s,
        "heap_peak_mb": peak / 2**20,
        "rss_mb": rss,
        "baseline_mb": base,
        "live": live,
        "disk_bytes_per_key": keys_bytes / live,
    }


def child(*args: str) -> dict:
    cmd = [sys.executable, __file__, "--child", *args]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--lookups", type=int, default=100_000)
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        mode, d, *rest = args.child
        import horologe.storage  # noqa: F401 - import cost belongs to the baseline

        if mode == "build":
            print(json.dumps(build(d, int(rest[0]), rest[1] == "keyed")))
        else:
            print(json.dumps(hold(d, int(rest[0]), int(rest[1]))))
        return
    n = args.keys
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as root:
        plain = child("build", os.path.join(root, "plain"), str(n), "plain")
        keyed = child("build", os.path.join(root, "keyed"), str(n), "keyed")
        held = child("hold", os.path.join(root, "keyed"), str(n), str(args.lookups))
    us = plain["us_per_msg"], keyed["us_per_msg"]
    print(f"store {n:,} messages: {us[0]:.1f} us each without keys, {us[1]:.1f} with")
    print(f"writer RSS after storing: {plain['rss_mb']:.0f} MB without keys, {keyed['rss_mb']:.0f} MB with")
    print(
        f"reopened, {held['live']:,} live keys: RSS {held['rss_mb']:.0f} MB "
        f"(python and imports {held['baseline_mb']:.0f} MB), traced heap peak {held['heap_peak_mb']:.1f} MB"
    )
    rates = held["hits_per_s"], held["misses_per_s"]
    print(f"look-ups: {rates[0]:,.0f} hits/s (each checked against its record), {rates[1]:,.0f} misses/s")
    print(f"disk: {held['disk_bytes_per_key']:.1f} bytes per key under keys/ (entries and heads cache)")


if __name__ == "__main__":
    main()
