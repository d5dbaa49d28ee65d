"""Time wheel figures: insert rate, hot-second drain, idle cost.

    python bench/bench_wheel.py [--hot 200000] [--idle-pending 1000000] [--idle-seconds 5]

* insert: ``on_append`` alone, and store append + ``on_append`` together;
* hot-second drain: ``advance_to`` over one second holding ``--hot`` messages, with the
  second preloaded (the normal case) and cold (chain walk included);
* idle: process CPU time while a driver waits for the next due message, with
  ``--idle-pending`` messages pending days ahead.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time

from horologe.storage import Message, Storage, StorageConfig
from horologe.wheel import TimeWheel, Watermark

T0 = 1_767_225_600_000  # 2026-01-01 00:00 UTC


def fill(store: Storage, times: list[int], ri0: int = 0) -> int:
    ri = ri0
    body = b"x" * 200
    for i in range(0, len(times), 1000):
        ri += 1
        batch = [Message("t", body, t, T0) for t in times[i : i + 1000]]
        store.apply(ri, lambda tx, b=batch: tx.append(b))
    return ri


def bench_insert(d: str) -> None:
    rng = random.Random(1)
    times = [T0 + 60_000 + rng.randrange(86_400_000) for _ in range(200_000)]
    with Storage(d, StorageConfig(fsync=False)) as s:
        wheel = TimeWheel(s, Watermark(T0))
        t0 = time.perf_counter()
        for i in range(0, len(times), 1000):
            wheel.on_append(times[i : i + 1000])
        pure = len(times) / (time.perf_counter() - t0)
        wheel = TimeWheel(s, Watermark(T0))
        t0 = time.perf_counter()
        body = b"x" * 200
        for ri, i in enumerate(range(0, len(times), 1000), 1):
            batch = [Message("t", body, t, T0) for t in times[i : i + 1000]]
            s.apply(ri, lambda tx, b=batch: tx.append(b))
            wheel.on_append(times[i : i + 1000])
        both = len(times) / (time.perf_counter() - t0)
    print(f"insert  on_append only                {pure:>12,.0f} msg/s")
    print(f"insert  store append + on_append      {both:>12,.0f} msg/s  (fsync off, 24 h spread)")


def bench_hot(d: str, hot: int) -> None:
    rng = random.Random(2)
    second = T0 + 30_000
    with Storage(d, StorageConfig(fsync=False)) as s:
        fill(s, [second + rng.randrange(1000) for _ in range(hot)])
        for preloaded in (True, False):
            wheel = TimeWheel(s, Watermark(T0), preload_ms=10_000 if preloaded else 0)
            wheel.advance_to(second - (5_000 if preloaded else 1_000))  # preload happens here
            t0 = time.perf_counter()
            n = 0
            while True:
                due = wheel.advance_to(second + 999, 10_000)
                n += len(due)
                if len(due) < 10_000:
                    break
            rate = n / (time.perf_counter() - t0)
            label = "preloaded" if preloaded else "cold     "
            print(f"hot second {label} {n:,} msgs, batches of 10k  {rate:>12,.0f} refs/s")


def bench_idle(d: str, pending: int, seconds: float) -> None:
    rng = random.Random(3)
    with Storage(d, StorageConfig(fsync=False)) as s:
        fill(s, [T0 + 2 * 86_400_000 + rng.randrange(5 * 86_400_000) for _ in range(pending)])
        wheel = TimeWheel(s, Watermark(T0))
        t0 = time.process_time()
        due = wheel.next_due_ms()
        first_call = time.process_time() - t0

        async def driver() -> int:
            wakeups = 0
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                now = T0 + int((time.monotonic() - deadline + seconds) * 1000)
                wheel.advance_to(now)
                nxt = wheel.next_due_ms()
                wait = (nxt - now) / 1000 if nxt is not None else seconds
                await asyncio.sleep(min(wait, deadline - time.monotonic()))
                wakeups += 1
            return wakeups

        c0 = time.process_time()
        wakeups = asyncio.run(driver())
        idle_cpu = time.process_time() - c0
    print(
        f"idle    {pending:,} pending from +2 d: next due in {(due - T0) / 3_600_000:.1f} h; "
        f"first next_due_ms() {first_call * 1000:.1f} ms CPU"
    )
    print(f"idle    driver over {seconds:.0f} s wall: {idle_cpu * 1000:.1f} ms CPU, {wakeups} wake-ups")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hot", type=int, default=200_000)
    ap.add_argument("--idle-pending", type=int, default=1_000_000)
    ap.add_argument("--idle-seconds", type=float, default=5.0)
    args = ap.parse_args()
    base = os.environ.get("BENCH_DIR")
    with tempfile.TemporaryDirectory(dir=base) as d:
        bench_insert(d)
    with tempfile.TemporaryDirectory(dir=base) as d:
        bench_hot(d, args.hot)
    with tempfile.TemporaryDirectory(dir=base) as d:
        bench_idle(d, args.idle_pending, args.idle_seconds)


if __name__ == "__main__":
    main()
