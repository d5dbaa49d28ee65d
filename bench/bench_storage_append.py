"""Append rate: 200-byte bodies in batches of 1,000, with sync points only (``fsync=False``,
the default: every 8 MiB) and with an fsync per batch (``fsync=True``).

    python bench/bench_storage_append.py [--batches 200]

Deliver times are spread over the next 24 hours, so every batch touches many hours.
Each setting runs twice: without keys, and with a key on every message, as the SDK sends
them (a 32-hex-digit key it makes up when the caller gives none).
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

from horologe.storage import Message, Storage, StorageConfig

H0 = 491_000 * 3_600_000


def run(batches: int, fsync: bool, keyed: bool) -> float:
    rng = random.Random(7)
    body = os.urandom(200)

    def key() -> str | None:
        return os.urandom(16).hex() if keyed else None

    all_batches = [
        [Message("orders", body, H0 + rng.randrange(86_400_000), H0, key=key()) for _ in range(1000)]
        for _ in range(batches)
    ]
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as d:
        store = Storage(d, StorageConfig(fsync=fsync))
        t0 = time.perf_counter()
        for ri, batch in enumerate(all_batches, 1):
            store.apply(ri, lambda tx, b=batch: tx.append(b))
        elapsed = time.perf_counter() - t0
        store.close()
    return batches * 1000 / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=200)
    args = ap.parse_args()
    for fsync in (False, True):
        for keyed in (False, True):
            rate = run(args.batches, fsync, keyed)
            setting = "per-batch  " if fsync else "sync points"
            print(
                f"append  fsync={setting}  {'keyed' if keyed else 'no keys':7}"
                f"  {rate:>10,.0f} msg/s  ({args.batches} batches x 1,000 x 200 B)"
            )


if __name__ == "__main__":
    main()
