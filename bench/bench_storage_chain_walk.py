"""Chain read rate: a second's messages, by its preGlobalIndex links (walked, or scanned when dense).

    python bench/bench_storage_chain_walk.py [--hot 200000]

Measures one hot second of ``--hot`` messages and 3,600 ordinary seconds of 50 each,
with the hour read through mmap (as the current delivery hour is) and without.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from horologe.storage import Message, Storage, StorageConfig

HOUR = 491_000
H0 = HOUR * 3_600_000


def build(d: str, hot: int) -> None:
    with Storage(d, StorageConfig(fsync=False)) as s:
        body = b"x" * 64
        ri = 0
        for start in range(0, hot, 5000):  # the hot second, interleaved with others
            ri += 1
            batch = [Message("t", body, H0 + 10_000 + (i % 1000), H0) for i in range(min(5000, hot - start))]
            s.apply(ri, lambda tx, b=batch: tx.append(b))
        for sec0 in range(0, 3600, 100):
            ri += 1
            batch = [Message("t", body, H0 + (sec0 + i % 100) * 1000 + 1, H0) for i in range(5000)]
            s.apply(ri, lambda tx, b=batch: tx.append(b))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hot", type=int, default=200_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as d:
        build(d, args.hot)
        for mapped in (True, False):
            with Storage(d, StorageConfig(fsync=False)) as s:
                if mapped:
                    s.map_hours([HOUR])
                b = s.bucket(HOUR)
                b.heads  # noqa: B018 - load the heads outside the timing
                b.index_view()  # verify checksums once, outside the timing
                t0 = time.perf_counter()
                n = len(b.chain(10))
                hot_rate = n / (time.perf_counter() - t0)
                t0 = time.perf_counter()
                total = sum(len(b.chain(sec)) for sec in range(3600) if sec != 10)
                all_rate = total / (time.perf_counter() - t0)
            mode = "mmap " if mapped else "pread"
            print(f"chain walk {mode} hot second ({n:,} msgs)      {hot_rate:>12,.0f} entries/s")
            print(f"chain walk {mode} 3,599 seconds ({total:,} msgs) {all_rate:>12,.0f} entries/s")


if __name__ == "__main__":
    main()
