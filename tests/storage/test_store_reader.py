"""A StoreReader follows a writer's published states and reads exactly what they name."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from horologe.storage import MessageId, ReadyEntry, Storage, StorageConfig, StorageError, check_store
from horologe.storage.store_reader import StoreReader

from .helpers import H0, HOUR, msg

CFG = StorageConfig(fsync=False, max_open_hours=2, max_cached_hours=3)


def _reader(store: Storage) -> StoreReader:
    return StoreReader(store.directory, CFG, store.published())


def test_reader_sees_each_batch_only_once_followed(tmp_path):
    store = Storage(str(tmp_path / "s"), CFG)
    reader = _reader(store)
    ids = store.apply(1, lambda tx: tx.append([msg(H0 + 1500 + i, body=b"x%d" % i) for i in range(5)]))
    assert reader.hours() == [] and reader.applied_index == 0  # not followed yet
    reader.follow(store.published())
    assert reader.hours() == [ids[0].hour]
    assert reader.bucket(ids[0].hour).count == 5
    assert reader.read_message(ids[4]).message.body == b"x4"
    # Appends after a followed state are invisible until the next one is followed.
    more = store.apply(2, lambda tx: tx.append([msg(H0 + 1500, body=b"late")]))
    assert reader.bucket(ids[0].hour).count == 5
    reader.follow(store.published())
    assert reader.read_message(more[0]).message.body == b"late"


def test_heads_tombstones_and_ready_logs_catch_up(tmp_path):
    store = Storage(str(tmp_path / "s"), CFG)
    reader = _reader(store)
    ri = 0
    all_ids: list[MessageId] = []
    for n in range(6):
        ri += 1
        batch = [msg(H0 + (i % 7) * 1000 + n, body=bytes([n, i])) for i in range(40)]
        all_ids += store.apply(ri, lambda tx, b=batch: tx.append(b))
        ri += 1
        store.apply(ri, lambda tx, m=all_ids[n * 40 + 3]: tx.cancel(m))
        ri += 1
        store.apply(ri, lambda tx, n=n: tx.append_ready("t", [ReadyEntry(5, n, 0, H0, H0)]))
        reader.follow(store.published())
        # The reader's view of every second equals the writer's, chain by chain.
        hour = all_ids[0].hour
        for sec in range(8):
            assert np.array_equal(reader.bucket(hour).chain(sec), store.bucket(hour).chain(sec))
        assert reader.bucket(hour).cancelled_mask().tolist() == store.bucket(hour).cancelled_mask().tolist()
        assert reader.ready_count("t") == n + 1
        assert reader.read_ready("t")["global_index"].tolist() == list(range(n + 1))


def test_names_follow_hours_added_out_of_order_and_cut(tmp_path):
    """Hours and ready logs are read from what each batch added (a bulk load adds
    thousands of hours), and from scratch after a cut: writer and reader name what the
    files hold at every step."""
    store = Storage(str(tmp_path / "s"), CFG)
    reader = _reader(store)
    ri, seen, ids = 0, [], {}
    for k in (5, 1, 9, 3, 0, 7):
        ri += 1
        (ids[k],) = store.apply(ri, lambda tx, k=k: tx.append([msg(H0 + k * 3_600_000 + 5)]))
        seen.append(HOUR + k)
        reader.follow(store.published())
        assert store.hours() == reader.hours() == sorted(seen)
    ri += 1
    store.apply(
        ri, lambda tx: tx.append_ready("orders", [ReadyEntry(ids[9].hour, ids[9].global_index, 0, H0, H0)])
    )
    ri += 1
    store.apply(ri, lambda tx: tx.seal_before(HOUR + 4))
    ri += 1
    assert store.apply(ri, lambda tx: tx.drop_hours_before(HOUR + 4)) == HOUR + 4
    reader.follow(store.published())
    assert store.hours() == reader.hours() == [HOUR + 5, HOUR + 7, HOUR + 9]
    ri += 1
    store.apply(ri, lambda tx: tx.append([msg(H0 + 8 * 3_600_000 + 5)]))
    ri += 1
    store.apply(
        ri, lambda tx: tx.append_ready("other", [ReadyEntry(ids[5].hour, ids[5].global_index, 0, H0, H0)])
    )
    reader.follow(store.published())
    assert store.hours() == reader.hours() == [HOUR + 5, HOUR + 7, HOUR + 8, HOUR + 9]
    for s in (store, reader):
        assert s.read_ready("orders")["global_index"].tolist() == [ids[9].global_index]
        assert s.read_ready("other")["global_index"].tolist() == [ids[5].global_index]
    check_store(store)


def test_reader_reopens_after_a_restore(tmp_path):
    src = Storage(str(tmp_path / "src"), CFG)
    src.apply(1, lambda tx: tx.append([msg(H0 + 3_600_000 + 5, body=b"from snapshot")]))
    src.snapshot(str(tmp_path / "snap"))
    store = Storage(str(tmp_path / "s"), CFG)
    store.apply(1, lambda tx: tx.append([msg(H0 + 5, body=b"old")]))
    reader = _reader(store)
    assert reader.hours() == [HOUR]
    store.restore(str(tmp_path / "snap"))
    reader.follow(store.published())
    assert reader.hours() == [HOUR + 1]
    assert reader.read_message(MessageId(HOUR + 1, 0)).message.body == b"from snapshot"


def test_a_reader_belongs_to_one_thread(tmp_path):
    store = Storage(str(tmp_path / "s"), CFG)
    reader = _reader(store)
    reader.follow(store.published())
    errors = []

    def other() -> None:
        try:
            reader.follow(store.published())
        except StorageError as e:
            errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 1


def test_published_state_is_a_copy(tmp_path):
    store = Storage(str(tmp_path / "s"), CFG)
    before = store.published()
    store.apply(1, lambda tx: tx.append([msg(H0 + 5)]))
    assert before.files == {} or all(before.files[k] <= v for k, v in store.published().files.items())
    assert before.applied_index == 0 and store.published().applied_index == 1
    with pytest.raises(TypeError):
        before.meta["x"] = 1  # type: ignore[index]
