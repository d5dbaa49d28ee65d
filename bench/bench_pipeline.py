"""Spark pipeline figures (issue #7), each beside a plain single-process path.

    python bench/bench_pipeline.py [--only schedule,audit] [--rows 1000000] [--records 10000000]

* schedule  ``--rows`` rows (Parquet, deliver times over 30 days) into 3 real local nodes:
            Spark (local[*]) vs. one process reading with pyarrow and posting with the SDK.
* audit     a store of ``--records`` delivered messages: the Spark audit vs. one process
            reading the same Arrow batches and aggregating with pandas.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import repo_root  # noqa: F401 - the repo root on sys.path, for testkit

HERE = os.path.dirname(os.path.abspath(__file__))


def bench_schedule(root: str, rows: int) -> None:
    import pyarrow.parquet as pq

    from horologe.pipeline.column_mapping import ColumnMapping
    from horologe.pipeline.poster import post_messages
    from horologe.pipeline.schedule import run_schedule, schedule_session
    from testkit.process_cluster import CLIENT, Cluster

    src = os.path.join(root, "rows.parquet")
    subprocess.run([sys.executable, os.path.join(HERE, "make_rows.py"), src, "--rows", str(rows)], check=True)
    mapping = ColumnMapping(
        body_col="body", topic="orders", tags_col="tags", deliver_at_col="deliver_at", key_col="order"
    )
    for path in ("spark", "plain"):
        c = Cluster(os.path.join(root, f"sched-{path}"), 3)
        c.start_all()
        urls = [c.url(i) for i in c.indexes]
        try:
            # Each path starts on a quiet disk: what an earlier path or run wrote or
            # deleted (a gigabyte, trimmed on delete here) is not this path's work. Run
            # back to back without this, the second run's Spark path measured 27.1-27.7k
            # rows/s three times; 45 s apart, 30.5k and 33.5k.
            os.sync()
            t0 = time.monotonic()
            if path == "spark":
                s = run_schedule(
                    schedule_session("local[*]"),
                    src,
                    mapping,
                    urls,
                    CLIENT,
                    os.path.join(root, "rejects"),
                )
                accepted, total = s.accepted, s.rows
            else:
                now = int(time.time() * 1000)
                table = pq.read_table(src).sort_by(mapping.time_column()).to_pylist()
                good = []
                for row in table:
                    try:
                        good.append(mapping.to_message(row, now))
                    except ValueError:
                        pass
                accepted, total = post_messages(good, urls, CLIENT).accepted, len(table)
            elapsed = time.monotonic() - t0
            print(
                f"schedule {path:5} {total:,} rows ({accepted:,} accepted) in {elapsed:.1f} s: "
                f"{total / elapsed:>9,.0f} rows/s end to end",
                flush=True,
            )
        finally:
            c.stop_all()


def build_delivered_store(path: str, records: int) -> None:
    from horologe.storage import Message, ReadyEntry, Storage, StorageConfig
    from horologe.wheel import Watermark

    rng = np.random.default_rng(9)
    t0 = 1_767_225_600_000
    with Storage(path, StorageConfig(fsync=False)) as s:
        ri = 0
        for first in range(0, records, 50_000):
            n = min(50_000, records - first)
            due = t0 + np.sort(rng.integers(0, 86_400_000, n))
            late = rng.exponential(5, n).astype(np.int64)
            msgs = [
                Message("orders", b"b" * 64, int(d), t0, tags=("a", "b") if k % 3 else ("a",))
                for k, d in enumerate(due)
            ]
            ri += 1
            ids = s.apply(ri, lambda tx, m=msgs: tx.append(m))
            ready = [
                ReadyEntry(i.hour, i.global_index, 0, int(d), int(d + lt), 0)
                for i, d, lt in zip(ids, due, late, strict=True)
            ]
            ri += 1
            s.apply(ri, lambda tx, r=ready: tx.append_ready("orders", r))
        s.apply(ri + 1, lambda tx: tx.set_meta("ws", Watermark(t0 + 86_400_000).to_wire()))


def plain_audit(path: str) -> int:
    """The same figures in one process: Arrow batches from the DataSource's readers, pandas."""
    import pyarrow as pa

    from horologe.pipeline.datasource import delivery_batches, message_batches
    from horologe.storage import Storage

    with Storage(path, read_only=True) as s:
        msgs = pa.Table.from_batches([b for h in s.hours() for b in message_batches(s, h)]).to_pandas()
        dels = pa.Table.from_batches([b for t in s.topics() for b in delivery_batches(s, t)]).to_pandas()
    dels["minute"] = dels["deliver_at_ms"] // 60_000
    dels["late"] = dels["delivered_at_ms"] - dels["deliver_at_ms"]
    dels.groupby("minute")["late"].quantile([0.5, 0.99])
    dups = dels.groupby(["topic", "id"]).size()
    missing = msgs[~msgs["id"].isin(dels["id"])]
    msgs.explode("tags").groupby("tags").size()
    return int((dups > 1).sum()) + len(missing)


def bench_audit(root: str, records: int) -> None:
    from horologe.pipeline.audit import run_audit
    from horologe.pipeline.spark_session import spark_session

    path = os.path.join(root, "audit-store")
    t0 = time.monotonic()
    build_delivered_store(path, records)
    print(
        f"audit    built a store of {records:,} delivered messages in {time.monotonic() - t0:.0f} s",
        flush=True,
    )
    spark = spark_session("local[*]", "bench")
    t0 = time.monotonic()
    r = run_audit(spark, path, os.path.join(root, "audit-out"))
    print(
        f"audit    spark {records:,} records: {time.monotonic() - t0:.1f} s "
        f"({r.messages:,} messages, {r.deliveries:,} deliveries, {r.duplicated_messages} duplicates)",
        flush=True,
    )
    t0 = time.monotonic()
    plain_audit(path)
    print(f"audit    plain pandas, one process: {time.monotonic() - t0:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="schedule,audit")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--records", type=int, default=10_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as root:
        if "schedule" in args.only:
            bench_schedule(root, args.rows)
        if "audit" in args.only:
            bench_audit(root, args.records)


if __name__ == "__main__":
    main()
