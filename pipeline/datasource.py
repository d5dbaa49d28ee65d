"""``spark.read.format("horologe").option("table", ...).load(data_dir)``: a node's store.

Reads a store read-only (a running node's directory is safe to read) and yields Arrow
record batches. ``data_dir`` is a node's data directory or its ``store/`` folder.

* ``table=messages`` (default): one row per stored message; one partition per hour.
* ``table=deliveries``: one row per ready-log entry; one partition per topic.
"""

from __future__ import annotations

import os

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

MESSAGES_SCHEMA = (
    "id string, hour int, global_index int, topic string, tags array<string>, key string, "
    "deliver_at_ms long, slot_ms long, produced_at_ms long, attempt int, body_bytes int, cancelled boolean"
)
DELIVERIES_SCHEMA = (
    "topic string, offset long, id string, hour int, global_index int, deliver_at_ms long, "
    "delivered_at_ms long, attempt int"
)
BATCH_ROWS = 65_536


def store_dir(path: str) -> str:
    inner = os.path.join(path, "store")
    return inner if os.path.isfile(os.path.join(inner, "commits.log")) else path


class HorologeDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "horologe"

    def schema(self) -> str:
        return DELIVERIES_SCHEMA if self.options.get("table") == "deliveries" else MESSAGES_SCHEMA

    def reader(self, schema) -> DataSourceReader:
        table = self.options.get("table", "messages")
        if table not in ("messages", "deliveries"):
            raise ValueError(f"table must be messages or deliveries, not {table!r}")
        return StoreReader(store_dir(self.options["path"]), table)


class StoreReader(DataSourceReader):
    def __init__(self, path: str, table: str) -> None:
        self.path = path
        self.table = table

    def partitions(self):
        from horologe.storage import Storage

        with Storage(self.path, read_only=True) as s:
            keys = s.hours() if self.table == "messages" else sorted(s.topics())
        return [InputPartition(k) for k in keys]

    def read(self, partition):
        from horologe.storage import Storage

        with Storage(self.path, read_only=True) as s:
            if self.table == "messages":
                yield from message_batches(s, partition.value)
            else:
                yield from delivery_batches(s, partition.value)


def message_batches(store, hour: int):
    """Arrow batches of one hour's messages, decoded from its delay log."""
    import pyarrow as pa

    from horologe.storage.delay_index import slot_ms
    from horologe.storage.framing import committed_frames
    from horologe.storage.magic import MAGIC_SIZE
    from horologe.storage.message import decode_record

    bucket = store.bucket(hour)
    view = bucket.index_view()
    if len(view) == 0:
        return
    cancelled = bucket.cancelled_mask()
    log = store.files.get(bucket.log_rel)
    slots = slot_ms(hour, view)
    cols: dict[str, list] = {
        k: []
        for k in ("id", "topic", "tags", "key", "deliver_at_ms", "produced_at_ms", "attempt", "body_bytes")
    }
    start = 0
    for n, (offset, payload) in enumerate(committed_frames(log.buffer(), MAGIC_SIZE, log.path)):
        m = decode_record(payload, log.path, offset)
        msg = m.message
        cols["id"].append(str(m.id))
        cols["topic"].append(msg.topic)
        cols["tags"].append(list(msg.tags))
        cols["key"].append(msg.key)
        cols["deliver_at_ms"].append(msg.deliver_at_ms)
        cols["produced_at_ms"].append(msg.produced_at_ms)
        cols["attempt"].append(msg.attempt)
        cols["body_bytes"].append(len(msg.body))
        if len(cols["id"]) == BATCH_ROWS:
            yield _message_batch(pa, cols, hour, start, slots, cancelled)
            start = n + 1
            cols = {k: [] for k in cols}
    if cols["id"]:
        yield _message_batch(pa, cols, hour, start, slots, cancelled)


def _message_batch(pa, cols, hour, start, slots, cancelled):
    import numpy as np

    n = len(cols["id"])
    return pa.RecordBatch.from_pydict(
        {
            "id": cols["id"],
            "hour": pa.array(np.full(n, hour, dtype=np.int32)),
            "global_index": pa.array(np.arange(start, start + n, dtype=np.int32)),
            "topic": cols["topic"],
            "tags": pa.array(cols["tags"], type=pa.list_(pa.string())),
            "key": pa.array(cols["key"], type=pa.string()),
            "deliver_at_ms": pa.array(cols["deliver_at_ms"], type=pa.int64()),
            "slot_ms": pa.array(slots[start : start + n]),
            "produced_at_ms": pa.array(cols["produced_at_ms"], type=pa.int64()),
            "attempt": pa.array(cols["attempt"], type=pa.int32()),
            "body_bytes": pa.array(cols["body_bytes"], type=pa.int32()),
            "cancelled": pa.array(cancelled[start : start + n]),
        }
    )


def delivery_batches(store, topic: str):
    """Arrow batches of one topic's ready log."""
    import numpy as np
    import pyarrow as pa

    total = store.ready_count(topic)
    for first in range(store.ready_base(topic), total, BATCH_ROWS):  # below the base: retention removed
        rows = store.read_ready(topic, first, first + BATCH_ROWS)
        hours = rows["hour"].astype(np.int64)
        gis = rows["global_index"].astype(np.int64)
        ids = [f"{h:08x}{g:08x}" for h, g in zip(hours.tolist(), gis.tolist(), strict=True)]
        yield pa.RecordBatch.from_pydict(
            {
                "topic": [topic] * len(rows),
                "offset": pa.array(np.arange(first, first + len(rows), dtype=np.int64)),
                "id": ids,
                "hour": pa.array(hours.astype(np.int32)),
                "global_index": pa.array(gis.astype(np.int32)),
                "deliver_at_ms": pa.array(rows["deliver_at_ms"].astype(np.int64)),
                "delivered_at_ms": pa.array(rows["delivered_at_ms"].astype(np.int64)),
                "attempt": pa.array(rows["attempt"].astype(np.int32)),
            }
        )
