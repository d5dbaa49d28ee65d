"""``horologe spark audit``: what a node's store says about delivery.

Reads the store through the ``horologe`` DataSource and computes, as of the store's
delivery watermark (the committed wheel state, the same on every node):

* lateness per minute of deliver time: p50 / p99 / max of delivered_at - deliver_at;
* duplicates: messages in a topic's ready log more than once;
* missing: not cancelled, due more than ``grace_ms`` before the watermark, not delivered;
* cancelled messages;
* backlog forecast: messages pending per hour for the next ``days`` days;
* tag distribution.

Each table is written as Parquet under ``out_dir``, with report.md and PNG plots.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd

from .datasource import store_dir


@dataclass
class AuditResult:
    watermark_ms: int
    messages: int
    deliveries: int
    lateness: pd.DataFrame  # minute_ms, delivered, p50_ms, p99_ms, max_ms
    duplicated_messages: int
    extra_deliveries: int
    missing: pd.DataFrame  # topic, id, slot_ms: the first MISSING_SHOWN (missing.parquet: all)
    missing_count: int
    cancelled: int
    backlog: pd.DataFrame  # hour_ms, pending
    tags: pd.DataFrame  # tag, messages: the TAGS_SHOWN most used (tags.parquet: all)


# What the driver collects of the missing messages and the tags (the report shows them):
# the tables in full are written by the executors, and may be as large as the store.
MISSING_SHOWN = 50
TAGS_SHOWN = 30


def watermark_of(data_dir: str) -> int:
    from horologe.storage import Storage

    with Storage(store_dir(data_dir), read_only=True) as s:
        ws = s.meta("ws")
    return 0 if ws is None else int(ws["ms"])


def run_audit(spark, data_dir: str, out_dir: str, *, grace_ms: int = 60_000, days: int = 7) -> AuditResult:
    from pyspark.sql import functions as F

    wm = watermark_of(data_dir)
    msgs = spark.read.format("horologe").load(data_dir).cache()
    dels = (
        spark.read.format("horologe")
        .option("table", "deliveries")
        .load(data_dir)
        .where(~F.col("topic").startswith("%DLQ%"))
        .cache()
    )
    late = F.col("delivered_at_ms") - F.col("deliver_at_ms")
    lateness = (
        dels.withColumn("minute_ms", (F.col("deliver_at_ms") / 60_000).cast("long") * 60_000)
        .groupBy("minute_ms")
        .agg(
            F.count("*").alias("delivered"),
            F.percentile_approx(late, 0.5, 10_000).alias("p50_ms"),
            F.percentile_approx(late, 0.99, 10_000).alias("p99_ms"),
            F.max(late).alias("max_ms"),
        )
        .orderBy("minute_ms")
    )
    per_message = dels.groupBy("topic", "id").count()
    dups = per_message.where("count > 1").agg(
        F.count("*").alias("n"), F.sum(F.col("count") - 1).alias("extra")
    )
    delivered = per_message.select("topic", "id")
    missing = (
        msgs.where((~F.col("cancelled")) & (F.col("slot_ms") + grace_ms < wm))
        .join(delivered, ["topic", "id"], "left_anti")
        .select("topic", "id", "slot_ms")
        .orderBy("slot_ms")
    )
    pending = msgs.where(~F.col("cancelled")).join(delivered, ["topic", "id"], "left_anti")
    backlog = (
        pending.where((F.col("slot_ms") >= wm) & (F.col("slot_ms") < wm + days * 86_400_000))
        .withColumn("hour_ms", (F.col("slot_ms") / 3_600_000).cast("long") * 3_600_000)
        .groupBy("hour_ms")
        .agg(F.count("*").alias("pending"))
        .orderBy("hour_ms")
    )
    tags = (
        msgs.select(F.explode("tags").alias("tag"))
        .groupBy("tag")
        .agg(F.count("*").alias("messages"))
        .orderBy(F.desc("messages"), "tag")
    )
    os.makedirs(out_dir, exist_ok=True)
    tables = {
        "lateness": lateness,
        "missing": missing,
        "backlog": backlog,
        "tags": tags,
        "cancelled": msgs.where("cancelled").select("topic", "id", "slot_ms"),
    }
    for name, df in tables.items():
        df.write.mode("overwrite").parquet(os.path.join(out_dir, f"{name}.parquet"))
    dup_row = dups.collect()[0]
    result = AuditResult(
        watermark_ms=wm,
        messages=msgs.count(),
        deliveries=dels.count(),
        lateness=lateness.toPandas(),
        duplicated_messages=int(dup_row["n"]),
        extra_deliveries=int(dup_row["extra"] or 0),
        missing=missing.limit(MISSING_SHOWN).toPandas(),
        missing_count=missing.count(),
        cancelled=msgs.where("cancelled").count(),
        backlog=backlog.toPandas(),
        tags=tags.limit(TAGS_SHOWN).toPandas(),
    )
    msgs.unpersist()
    dels.unpersist()
    from .report import write_report

    write_report(result, out_dir, grace_ms=grace_ms, days=days)
    return result
