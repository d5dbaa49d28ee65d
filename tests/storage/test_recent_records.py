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
    plain = StoreReader(store.directory, StorageConfig(recent_records_bytes=0), store.published())
    on_disk = _read(plain, ids)
    # Some taken, then a read of those and others: the others from memory, those from the log.
    assert _read(reader, ids[10:20]) == on_disk[10:20]
    assert _read(reader, ids[5:25]) == on_disk[5:25]
    _spoil_delay_log(store, ids[0].hour)
    # From memory: the bytes as written, though the log no longer holds them.
    assert _read(reader, ids[25:]) == on_disk[25:]
    # Taken once: read again, they come from the log, and its damage is found.
    for taken in (ids[25:30], ids[5:10], ids[20:25]):
        with pytest.raises(CorruptLogError):
            _read(reader, taken)
    assert _read(reader, ids[:5]) == on_disk[:5]


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


def test_what_is_kept_stays_within_its_bound_the_oldest_dropped_first():
    each = 100 + OVERHEAD
    kept = RecentRecords(10 * each)
    kept.keep((_run(HOUR, list(range(6))),))
    kept.keep((_run(HOUR, list(range(6, 12))),))  # past the bound: positions 0 and 1 go
    assert len(kept) == 10 and kept.bytes == 10 * each
    assert kept.take(HOUR, [0, 1]) is None
    assert kept.take(HOUR, [1, 2, 3]) == [None, b"\x02" * 100, b"\x03" * 100]
    assert len(kept) == 8 and kept.bytes == 8 * each
    kept.keep((_run(HOUR + 1, [0, 1, 2, 3]),))  # positions 4 and 5 of HOUR go
    assert kept.bytes == 10 * each and kept.take(HOUR, [4, 5]) is None
    kept.keep((_run(HOUR + 2, [0]),))  # a later hour: hours before the previous one go
    assert len(kept) == 5 and kept.bytes == 5 * each
    assert kept.take(HOUR, [6]) is None and kept.take(HOUR + 1, [1]) is not None
    kept.drop_before(HOUR + 2)
    assert len(kept) == 1 and kept.bytes == each
    kept.clear()
    assert len(kept) == 0 and kept.bytes == 0


def test_a_message_asked_for_twice_is_given_once_and_counted_once():
    kept = RecentRecords(1 << 20)
    kept.keep((_run(HOUR, [0, 1]),))
    kept.keep((_run(HOUR, [1]),))  # again: counted once
    assert kept.bytes == 2 * (100 + OVERHEAD)
    assert kept.take(HOUR, [0, 0, 1]) == [b"\x00" * 100, None, b"\x01" * 100]
    assert len(kept) == 0 and kept.bytes == 0
    kept.keep((_run(HOUR, [5, 6]),))  # an hour emptied by takes is kept again from the next
    assert kept.take(HOUR, [5]) == [b"\x05" * 100]
