"""The audit on a store with known lateness, duplicates, gaps and cancels: exact numbers."""

from __future__ import annotations

import os

from horologe.storage import Message, MessageId, ReadyEntry, Storage, StorageConfig
from horologe.wheel import Watermark

T = 1_767_225_600_000  # 2026-01-01 00:00 UTC
MIN = 60_000


def build_store(root: str) -> None:
    """Minute 0: 10 messages, lateness 0..9 ms; minute 1: 4 messages, lateness 100 ms, one
    delivered twice; one due in minute 2 never delivered; one cancelled; 6 due tomorrow."""
    with Storage(root, StorageConfig(fsync=False)) as s:
        due = [T + k * 1000 for k in range(10)] + [T + MIN + k for k in range(4)] + [T + 2 * MIN, T + 3 * MIN]
        later = [T + 86_400_000 + h * 3_600_000 for h in (1, 1, 1, 2, 2, 5)]
        msgs = [
            Message("orders", b"x", d, T, tags=("a",) if i % 2 else ("a", "b")) for i, d in enumerate(due)
        ]
        msgs += [Message("pay", b"y", d, T, tags=("c",)) for d in later]
        ids = s.apply(1, lambda tx: tx.append(msgs))
        s.apply(2, lambda tx: tx.cancel(ids[15]))
        ready = [ReadyEntry(i.hour, i.global_index, 0, due[k], due[k] + k, 0) for k, i in enumerate(ids[:10])]
        ready += [
            ReadyEntry(i.hour, i.global_index, 0, due[k], due[k] + 100, 0)
            for k, i in enumerate(ids[10:14], 10)
        ]
        ready.append(
            ReadyEntry(ids[12].hour, ids[12].global_index, 0, due[12], due[12] + 100, 0)
        )  # duplicate
        s.apply(3, lambda tx: tx.append_ready("orders", ready))
        s.apply(4, lambda tx: tx.set_meta("ws", Watermark(T + 10 * MIN).to_wire()))
        assert str(ids[14]) == str(MessageId(ids[14].hour, ids[14].global_index))


def test_audit_numbers(spark, tmp_path):
    root = str(tmp_path / "n1" / "store")
    build_store(root)
    from horologe.pipeline.audit import run_audit

    r = run_audit(spark, str(tmp_path / "n1"), str(tmp_path / "out"), grace_ms=MIN, days=7)
    assert r.watermark_ms == T + 10 * MIN
    assert (r.messages, r.deliveries, r.cancelled) == (22, 15, 1)
    assert (r.duplicated_messages, r.extra_deliveries) == (1, 1)
    assert list(r.missing["slot_ms"]) == [T + 2 * MIN]  # the cancelled one at +3 min is not missing
    lat = r.lateness.set_index("minute_ms")
    assert list(lat.loc[T, ["delivered", "p50_ms", "max_ms"]]) == [10, 4, 9]
    assert list(lat.loc[T + MIN, ["delivered", "p50_ms", "p99_ms", "max_ms"]]) == [5, 100, 100, 100]
    assert list(r.backlog["pending"]) == [3, 2, 1]
    assert dict(zip(r.tags["tag"], r.tags["messages"], strict=True)) == {"a": 16, "b": 8, "c": 6}
    for name in ("report.md", "lateness.png", "backlog.png", "lateness.parquet", "missing.parquet"):
        assert os.path.exists(tmp_path / "out" / name), name
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| messages delivered more than once | 1 (1 extra) |" in report


def test_the_driver_collects_a_few_missing_messages_and_tags_however_many(spark, tmp_path, monkeypatch):
    """Every missing message and every tag was collected into the driver's memory, for a
    report that shows 50 and 30: a store with millions missing (or a tag per customer)."""
    from horologe.pipeline import audit

    build_store(str(tmp_path / "n1" / "store"))
    monkeypatch.setattr(audit, "MISSING_SHOWN", 0)
    monkeypatch.setattr(audit, "TAGS_SHOWN", 2)
    r = audit.run_audit(spark, str(tmp_path / "n1"), str(tmp_path / "out"), grace_ms=MIN, days=7)
    assert (len(r.missing), r.missing_count) == (0, 1)
    assert dict(zip(r.tags["tag"], r.tags["messages"], strict=True)) == {"a": 16, "b": 8}
    report = (tmp_path / "out" / "report.md").read_text()
    assert "undelivered) | 1 |" in report and "## Tags (the 2 most used; tags.parquet: all)" in report


def test_datasource_reads_a_live_store_without_touching_it(spark, tmp_path):
    root = str(tmp_path / "s")
    build_store(root)
    with open(os.path.join(root, "commits.log"), "ab") as f:
        f.write(b"\x09\x00\x00")  # a node mid-write
    before = {p: os.path.getsize(os.path.join(d, p)) for d, _, ps in os.walk(root) for p in ps}
    df = spark.read.format("horologe").load(root)
    assert df.count() == 22
    assert df.where("topic = 'pay'").count() == 6
    after = {p: os.path.getsize(os.path.join(d, p)) for d, _, ps in os.walk(root) for p in ps}
    assert before == after
