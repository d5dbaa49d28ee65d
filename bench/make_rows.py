"""Write a file of rows for `horologe spark schedule` (docs/pipeline.md's worked example).

    python bench/make_rows.py rows.parquet --rows 1000000 [--bad 0.001]

Columns: order (key), body, deliver_at (epoch ms, over the next 30 days), tags
(comma-separated). About ``--bad`` of the rows are invalid on purpose.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", help="ends in .parquet or .csv")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--bad", type=float, default=0.001, help="share of invalid rows")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    n = args.rows
    now = int(time.time() * 1000)
    deliver_at = now + 60_000 + rng.integers(0, 30 * 86_400_000, n)
    bad = rng.random(n) < args.bad
    deliver_at[bad] = now + 500 * 86_400_000  # beyond the 400-day maximum: rejected
    tags = np.where(rng.random(n) < 0.5, "timeout", "timeout,vip")
    table = pa.table(
        {
            "order": np.arange(n).astype(str),
            "body": [f"cancel order {k} if unpaid" for k in range(n)],
            "deliver_at": deliver_at,
            "tags": tags,
        }
    )
    if args.path.endswith(".csv"):
        pacsv.write_csv(table, args.path)
    else:
        pq.write_table(table, args.path)
    print(f"wrote {n:,} rows ({int(bad.sum()):,} invalid) to {args.path}")


if __name__ == "__main__":
    main()
