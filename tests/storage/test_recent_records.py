"""A reader keeps the records of messages due soon that a followed state wrote, and a
pull's read takes them from memory (storage/recent_records.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from horologe.storage import CorruptLogError, Storage, StorageConfig
from horologe.storage.recent_records import OVERHEAD, SOON_MS, RecentRecords, WrittenRecords
from horologe.storage.store_reader import StoreReader

from .helpers import H0, HOUR, msg

CFG = StorageConfig(fsync=False)


def _spoil_delay_log(store: Storage, hour: int) -> None:
    """Overwrite the hour's delay log, past its magic, with other bytes of its length."""
    path = os.path.join(store.directory, store.bucket(hour).log_rel)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(64)
        f.write(b"\xa5" * (size - 64))


def _read(reader: StoreReader, ids) -> list[bytes]:
    hours = np.array([m.hour for m in ids])
    gis = np.array([m.global_index for m in ids])
    return [bytes(r) for r in reader.read_records_at(hours, gis)]


def test_records_of_messages_due_soon_come_from_memory_once(tmp_path):
    store = Storage(str(tmp_path / "s"), CFG)
    reader = StoreReader(store.directory, CFG, store.published())
    soon = [msg(H0 + 5_000 + i, body=b"soon %d" % i, key=f"k{i}", tags=("a",)) for i in range(50)]
    ids = store.apply(1, lambda tx: tx.append(soon))
    reader.follow(store.published())
    on_disk = _read(StoreReader(store.directory, StorageConfig(recent_records_bytes=0), store.published()), ids)
    _spoil_delay_log(store, ids[0].hour)
    # Taken from memory: the bytes as written, though the log no longer holds them.
    assert _read(reader, ids[:20]) == on_disk[:20]
    # Taken once: read again, they come from the log, and its damage is found.
    with pytest.raises(CorruptLogError):
        _read(reader, ids[:20])
    # Only all or nothing: one not kept sends the whole read to the log.
    with pytest.raises(CorruptLogError):
        _read(reader, ids[15:30])
    assert _read(reader, ids[30:]) == on_disk[30:]


def test_messages_produced_to_wait_are_read_from_the_log(tmp_path):
    store = Storage(str(tmp_path / "s"), CFG)
    reader = StoreReader(store.directory, CFG, store.published())
    later = [msg(H0 + SOON_MS + 1 + i, produced_at_ms=H0) for i in range(10)]
    ids = store.apply(1, lambda tx: tx.append(later))
    reader.follow(store.published())
    _spoil_delay_log(store, ids[0].hour)
    with pytest.raises(CorruptLogError):
        _read(reader, ids)


def test_a_reader_not_asked_to_keep_keeps_nothing(tmp_path):
    store = Storage(str(tmp_path / "s"), CFG)
    reader = StoreReader(store.directory, CFG, store.published())
    ids = store.apply(1, lambda tx: tx.append([msg(H0 + 1_000 + i) for i in range(10)]))
    reader.follow(store.published(), keep_written=False)
    _spoil_delay_log(store, ids[0].hour)
    with pytest.raises(CorruptLogError):
        _read(reader, ids)


def test_a_batch_rides_on_one_published_state_only(tmp_path):
    store = Storage(str(tmp_path / "s"), CFG)
    store.apply(1, lambda tx: tx.append([msg(H0 + 1_000)]))
    assert len(store.published().written) == 1
    assert store.published().written == ()  # handed on once
    store.apply(2, lambda tx: tx.append([msg(H0 + 1_000)]))
    store.apply(3, lambda tx: tx.append([msg(H0 + 2_000), msg(H0 + 3_000)]))
    (run,) = store.published().written  # the last batch's: a reader follows every one
    assert run.gis == [2, 3]


def _run(hour: int, gis: list[int], size: int = 100) -> WrittenRecords:
    return WrittenRecords(hour, gis, [bytes([gi % 256]) * size for gi in gis])


def test_what_is_kept_stays_within_its_bound_and_falls_back():
    each = 100 + OVERHEAD
    kept = RecentRecords(10 * each)
    kept.keep((_run(HOUR, list(range(6))),))
    kept.keep((_run(HOUR, list(range(6, 12))),))  # would pass the bound: not kept
    assert len(kept) == 6 and kept.bytes == 6 * each
    assert kept.take(HOUR, [6]) is None
    assert kept.take(HOUR, [1, 2]) == [b"\x01" * 100, b"\x02" * 100]
    assert len(kept) == 4 and kept.bytes == 4 * each
    kept.keep((_run(HOUR + 1, [0, 1]),))
    assert len(kept) == 6
    kept.keep((_run(HOUR + 2, [0]),))  # a later hour: hours before the previous one go
    assert len(kept) == 3 and kept.bytes == 3 * each
    assert kept.take(HOUR, [0]) is None and kept.take(HOUR + 1, [1]) is not None
    kept.drop_before(HOUR + 2)
    assert len(kept) == 1 and kept.bytes == each
    kept.clear()
    assert len(kept) == 0 and kept.bytes == 0


def test_a_message_asked_for_twice_is_given_twice_and_counted_once():
    kept = RecentRecords(1 << 20)
    kept.keep((_run(HOUR, [0, 1]),))
    assert kept.take(HOUR, [0, 0, 1]) == [b"\x00" * 100, b"\x00" * 100, b"\x01" * 100]
    assert len(kept) == 0 and kept.bytes == 0
