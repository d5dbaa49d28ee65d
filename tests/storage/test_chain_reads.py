"""Reading a second's chain: walked link by link, or found by scanning its index span.
Both give the same globalIndexes, and both refuse an index whose links do not hold."""

from __future__ import annotations

import numpy as np
import pytest

from horologe.storage import CorruptLogError, Storage, StorageConfig
from horologe.storage.delay_index import INDEX
from horologe.storage.hour_bucket import SCAN_FACTOR
from horologe.storage.hour_names import hour_name
from horologe.wheel.loaded_second import LoadedSecond

from .helpers import H0, HOUR, msg

HOT_SEC, SPARSE_SEC = 10, 20


def build(path: str) -> list[int]:
    """An hour with a hot second (long chain, dense span) and a sparse one (a few entries
    spread over a long span); the globalIndexes of the hot second, in arrival order."""
    hot: list[int] = []
    with Storage(path, StorageConfig(fsync=False)) as s:
        ri = 0
        for round_ in range(6):
            ri += 1
            batch = [msg(H0 + HOT_SEC * 1000 + i % 1000) for i in range(700)]
            batch.append(msg(H0 + SPARSE_SEC * 1000 + round_))
            batch += [msg(H0 + (100 + i % 3000) * 1000) for i in range(400)]
            ids = s.apply(ri, lambda tx, b=batch: tx.append(b))
            hot += [m.global_index for m in ids[:700]]
    return hot


def walked(bucket, sec: int, from_local_index: int = 0) -> list[int]:
    n, last = int(bucket.heads.count[sec]), int(bucket.heads.last[sec])
    return bucket._walk(bucket.index_view(), sec, n, from_local_index, last).tolist()


def test_a_long_chain_is_scanned_and_matches_the_walk(tmp_path, monkeypatch):
    path = str(tmp_path / "s")
    hot = build(path)
    with Storage(path, StorageConfig(fsync=False)) as s:
        b = s.bucket(HOUR)
        assert hot[-1] < SCAN_FACTOR * len(hot)  # the hot second is scanned, even from 0
        scans = []
        real = b._scan
        monkeypatch.setattr(b, "_scan", lambda *a: scans.append(a[3:]) or real(*a))
        assert b.chain(HOT_SEC).tolist() == hot == walked(b, HOT_SEC)
        assert b.chain(HOT_SEC, 1000, hot[999]).tolist() == hot[1000:] == walked(b, HOT_SEC, 1000)
        assert b.chain(HOT_SEC, 1000).tolist() == hot[1000:]  # no hint: scanned from the start
        assert b.chain(HOT_SEC, 1000, hot[5]).tolist() == hot[1000:]  # a wrong hint: walked instead
        assert len(scans) == 4
        assert b.chain(SPARSE_SEC).tolist() == walked(b, SPARSE_SEC)  # 6 over a long span: walked
        assert len(scans) == 4


def reseal(path: str, gi: int, **fields: int) -> None:
    """Rewrite index entry ``gi`` with ``fields`` changed, under a valid checksum."""
    with open(f"{path}/delay/{hour_name(HOUR)}.idx", "r+b") as f:
        f.seek(INDEX.offset_of(gi))
        row = np.frombuffer(f.read(INDEX.size), dtype=INDEX.dtype).copy()
        for name, value in fields.items():
            row[name] = value
        f.seek(INDEX.offset_of(gi))
        f.write(INDEX.seal(row).tobytes())


def test_a_broken_link_of_a_scanned_chain_is_reported_where_the_walk_meets_it(tmp_path):
    path = str(tmp_path / "s")
    hot = build(path)
    reseal(path, hot[500], pre_global_index=hot[300])
    with Storage(path, StorageConfig(fsync=False)) as s:
        with pytest.raises(CorruptLogError, match=f"chain of second {HOT_SEC} broken at localIndex 499"):
            s.bucket(HOUR).chain(HOT_SEC)
        with pytest.raises(CorruptLogError, match="broken at localIndex 499"):  # scanned from 0
            s.bucket(HOUR).chain(HOT_SEC, 1000)
        assert s.bucket(HOUR).chain(HOT_SEC, 501, hot[500]).tolist() == hot[501:]  # past the break


def test_an_entry_that_claims_a_scanned_second_off_its_chain_is_refused(tmp_path):
    path = str(tmp_path / "s")
    hot = build(path)
    stray = next(gi for gi in range(hot[0], hot[-1]) if gi not in set(hot))
    reseal(path, stray, second_of_hour=HOT_SEC)
    with Storage(path, StorageConfig(fsync=False)) as s:
        with pytest.raises(CorruptLogError, match=f"entries of second {HOT_SEC} lie off its chain"):
            s.bucket(HOUR).chain(HOT_SEC)


def test_links_out_of_arrival_order_are_refused_though_the_walk_holds(tmp_path):
    """The hot second's last two entries swap localIndexes and links: walking from the
    head still meets each localIndex once, but the chain runs against arrival order."""
    path = str(tmp_path / "s")
    hot = build(path)
    a, b = hot[-2], hot[-1]
    reseal(path, a, local_index=len(hot) - 1, pre_global_index=b)
    reseal(path, b, local_index=len(hot) - 2, pre_global_index=hot[-3])
    with Storage(path, StorageConfig(fsync=False)) as s:
        bucket = s.bucket(HOUR)
        bucket.heads.last[HOT_SEC] = a  # the head the swapped chain starts from
        assert walked(bucket, HOT_SEC) == hot[:-2] + [b, a]
        with pytest.raises(CorruptLogError, match=f"entries of second {HOT_SEC} run out of arrival order"):
            bucket.chain(HOT_SEC)


def test_a_head_that_names_another_second_is_refused_not_read_past(tmp_path):
    path = str(tmp_path / "s")
    hot = build(path)
    with Storage(path, StorageConfig(fsync=False)) as s:
        bucket = s.bucket(HOUR)
        bucket.heads.last[HOT_SEC] = hot[-1] + 1  # an entry of another second
        with pytest.raises(CorruptLogError, match=f"chain of second {HOT_SEC} broken"):
            bucket.chain(HOT_SEC)


def test_the_wheel_catches_up_on_a_hot_second_from_where_it_stopped(tmp_path, monkeypatch):
    """LoadedSecond hands the last globalIndex it holds, so the catch-up is scanned from
    there: were the hint wrong, the chain would be walked instead."""
    path = str(tmp_path / "s")
    hot = build(path)
    with Storage(path, StorageConfig(fsync=False)) as s:
        bucket = s.bucket(HOUR)
        second = LoadedSecond(s, HOUR * 3600 + HOT_SEC)
        second.refresh()
        assert second.known == len(hot) and second.last_gi == hot[-1]
        more = [msg(H0 + HOT_SEC * 1000 + 999) for _ in range(300)]
        added = [m.global_index for m in s.apply(99, lambda tx: tx.append(more))]
        monkeypatch.setattr(bucket, "_walk", lambda *a: pytest.fail("walked instead of scanned"))
        second.refresh()
        assert sorted(second.rows["global_index"].tolist()) == hot + added
