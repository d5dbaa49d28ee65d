"""The key index on disk: lifetime, scale, restarts, torn tails, corruption, cleaning."""

from __future__ import annotations

import os

import numpy as np
import pytest

from horologe.storage import CorruptLogError, Storage, StorageConfig, check_store
from horologe.storage.errors import StorageFullError
from horologe.storage.key_heads import HEADS_NAME
from horologe.storage.key_index import KEY_ENTRY, LIVE

from .helpers import H0, HOUR, msg, replica_state, tree_bytes

DAY_MS = 86_400_000


def key_segments(root: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(root, "keys")) if n.endswith(".kix"))


def test_a_key_is_found_after_a_million_other_keys(tmp_path):
    """The old in-memory window held 10**6 keys at most, oldest evicted first."""
    root = str(tmp_path / "s")
    # Few buckets and small segments: long chains that cross many segment files.
    cfg = StorageConfig(fsync=False, key_buckets=1 << 16, key_segment_entries=1 << 17)
    batches, batch = 21, 50_000  # 1,050,000 keys after the first
    with Storage(root, cfg) as s:
        first = s.apply(1, lambda tx: tx.append([msg(H0 + 30 * DAY_MS, key="the-first")]))[0]
        for ri in range(2, 2 + batches):
            ks = range((ri - 2) * batch, (ri - 1) * batch)
            msgs = [msg(H0 + 3_600_000 + k % 3_600_000, key=f"k{k}", body=b"") for k in ks]
            s.apply(ri, lambda tx, m=msgs: tx.append(m))
        assert s.meta(LIVE) == batches * batch + 1
        assert len(key_segments(root)) == -(-(batches * batch + 1) // (1 << 17))
        assert s.lookup_key("orders", "the-first") == first
        again = s.apply(ri + 1, lambda tx: tx.append([msg(H0 + 1, key="the-first", body=b"retry")]))[0]
        assert again == first
        assert s.lookup_key("orders", "k0") is not None and s.lookup_key("orders", "k999999") is not None
        assert s.lookup_key("orders", "never") is None


def test_a_thirty_day_key_outlives_a_day_of_deliveries_and_cleaning(tmp_path):
    """Sealed hours move on for 29 days; cleaning copies the live key forward and drops
    the dead ones; the key still answers until its own hour was delivered a window ago."""
    root = str(tmp_path / "s")
    cfg = StorageConfig(fsync=False, key_segment_entries=64, key_clean_slack=0)
    with Storage(root, cfg) as s:
        far = s.apply(1, lambda tx: tx.append([msg(H0 + 30 * DAY_MS, key="monthly")]))[0]
        ri = 1
        for h in range(1, 30 * 24):
            ri += 1
            # a few short-lived keys every hour, delivered the next hour
            msgs = [msg(H0 + h * 3_600_000 + k, key=f"h{h}-{k}") for k in range(10)]

            def step(tx, m=msgs, h=h):
                tx.seal_before(HOUR + h)
                tx.append(m)

            s.apply(ri, step)
            assert s.lookup_key("orders", "monthly") == far
        # the index stayed small: dead keys were dropped, their segments removed
        assert s.meta(LIVE) <= 25 * 10 + 1
        segs = key_segments(root)
        assert len(segs) <= 2 * (25 * 10 + 1) // 64 + 2, segs
        assert "index.0.kix" not in segs
        check_store(s)
        ri += 1
        s.apply(ri, lambda tx: tx.seal_before(far.hour + 1))  # the month's hour delivered
        assert s.lookup_key("orders", "monthly") == far  # ... for less than the window
        ri += 1
        s.apply(ri, lambda tx: tx.seal_before(far.hour + 1 + 24 + 1))
        assert s.lookup_key("orders", "monthly") is None
        check_store(s)


def test_dedupe_across_restarts_with_or_without_the_heads_cache(tmp_path):
    root = str(tmp_path / "s")
    cfg = StorageConfig(fsync=False, key_buckets=1 << 4)
    with Storage(root, cfg) as s:
        ids = s.apply(1, lambda tx: tx.append([msg(H0 + k, key=f"k{k}") for k in range(100)]))
    with Storage(root, cfg) as s:  # heads from their cache file
        assert [s.lookup_key("orders", f"k{k}") for k in range(100)] == ids
        more = s.apply(2, lambda tx: tx.append([msg(H0 + 200 + k, key=f"m{k}") for k in range(50)]))
        s.key_index._heads_saved = s.key_index.heads.covered  # pretend saved: the file stays stale
    with Storage(root, cfg) as s:  # a stale cache, caught up from the index
        assert [s.lookup_key("orders", f"m{k}") for k in range(50)] == more
        check_store(s)
    os.unlink(os.path.join(root, HEADS_NAME))
    with Storage(root, cfg) as s:  # no cache: rebuilt
        assert s.apply(3, lambda tx: tx.append([msg(H0 + 9, key="k7")]))[0] == ids[7]
        assert s.bucket(HOUR).count == 150
        check_store(s)


def test_replicas_write_the_same_key_index_whatever_their_caches(tmp_path):
    """One replica keeps its heads in memory, the other loses its cache between batches."""
    cfg = StorageConfig(
        fsync=False, key_window_ms=3_600_000, key_buckets=1 << 12, key_segment_entries=100, key_clean_slack=10
    )

    def run(root: str, lose_cache: bool) -> None:
        s = Storage(root, cfg)
        for ri in range(1, 60):
            msgs = [msg(H0 + (ri + k) * 3_600_000 // 3, key=f"{ri}/{k}") for k in range(20)]

            def step(tx, m=msgs, ri=ri):
                tx.seal_before(HOUR + ri // 3)
                tx.append(m)

            s.apply(ri, step)
            if lose_cache:
                s.close()
                if os.path.exists(os.path.join(root, HEADS_NAME)):
                    os.unlink(os.path.join(root, HEADS_NAME))
                s = Storage(root, cfg)
        check_store(s)
        s.close()

    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    run(a, lose_cache=False)
    run(b, lose_cache=True)
    ta = tree_bytes(a)
    assert {k for k in ta if k.startswith("keys/") and k.endswith(".kix")}
    assert "keys/index.0.kix" not in ta  # cleaning ran: pre links below its cursor were written
    assert replica_state(a, cfg) == replica_state(b, cfg)


def test_a_torn_key_index_tail_is_set_aside(tmp_path):
    root = str(tmp_path / "s")
    cfg = StorageConfig(fsync=False)
    with Storage(root, cfg) as s:
        ids = s.apply(1, lambda tx: tx.append([msg(H0 + k, key=f"k{k}") for k in range(10)]))
    (seg,) = key_segments(root)
    path = os.path.join(root, "keys", seg)
    committed = os.path.getsize(path)
    with open(path, "ab") as f:  # a batch cut short: an entry and a half, never committed
        f.write(KEY_ENTRY.pack(123, -1, HOUR, 99) + b"\x01" * 11)
    with Storage(root, cfg) as s:
        assert any(seg in line for line in s.recovered), s.recovered
        assert os.path.getsize(path) == committed
        assert [s.lookup_key("orders", f"k{k}") for k in range(10)] == ids
        more = s.apply(2, lambda tx: tx.append([msg(H0 + 50, key="after")]))[0]
        assert s.lookup_key("orders", "after") == more
        check_store(s)


@pytest.mark.parametrize("field_at", [0, 8, 16, 24])  # key_hash, pre, hour, crc
def test_a_corrupt_key_entry_is_refused(tmp_path, field_at):
    root = str(tmp_path / "s")
    cfg = StorageConfig(fsync=False, key_buckets=1)  # one chain: every look-up walks every entry
    with Storage(root, cfg) as s:
        s.apply(1, lambda tx: tx.append([msg(H0 + k, key=f"k{k}") for k in range(5)]))
    (seg,) = key_segments(root)
    with open(os.path.join(root, "keys", seg), "r+b") as f:
        f.seek(8 + 2 * KEY_ENTRY.size + field_at)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x40]))
    with Storage(root, cfg) as s:
        with pytest.raises(CorruptLogError) as e:
            s.lookup_key("orders", "k0")  # the walk passes entry 2
        assert seg in e.value.path
        with pytest.raises(CorruptLogError):
            s.apply(2, lambda tx: tx.append([msg(H0, key="k0")]))
        with pytest.raises(CorruptLogError):
            check_store(s)


def test_a_rolled_back_batch_leaves_the_key_index_as_it_was(tmp_path):
    root = str(tmp_path / "s")
    with Storage(root, StorageConfig(fsync=False, key_buckets=1 << 2)) as s:
        ids = s.apply(1, lambda tx: tx.append([msg(H0 + k, key=f"k{k}") for k in range(8)]))
        before = tree_bytes(root)

        def fails(tx):
            tx.append([msg(H0 + 100 + k, key=f"new{k}") for k in range(8)])
            raise ValueError("the batch fails after indexing its keys")

        with pytest.raises(ValueError):
            s.apply(2, fails)
        assert tree_bytes(root) == before
        assert [s.lookup_key("orders", f"k{k}") for k in range(8)] == ids
        assert all(s.lookup_key("orders", f"new{k}") is None for k in range(8))
        check_store(s)
        assert s.apply(2, lambda tx: tx.append([msg(H0, key="new0")]))[0].global_index == 8
        check_store(s)


def test_the_key_window_files_of_the_old_format_go_with_the_next_batch(tmp_path):
    root = str(tmp_path / "s")
    with Storage(root, StorageConfig(fsync=False)) as s:
        s.apply(1, lambda tx: s.files.writable("keys/2026010100.keys", b"HZKEYS").append(b"old frames"))
    assert os.path.exists(os.path.join(root, "keys", "2026010100.keys"))
    with Storage(root, StorageConfig(fsync=False)) as s:
        mid = s.apply(2, lambda tx: tx.append([msg(H0, key="k")]))[0]
        assert not os.path.exists(os.path.join(root, "keys", "2026010100.keys"))
        assert "keys/2026010100.keys" not in s.file_lengths() and s.lookup_key("orders", "k") == mid
        check_store(s)


def _entries_read(s: Storage, monkeypatch) -> list[int]:
    """Count the key entries the index reads from here on (one a chain link walked)."""
    read = [0]
    entry = s.key_index._entry

    def counted(n, firsts):
        read[0] += 1
        return entry(n, firsts)

    monkeypatch.setattr(s.key_index, "_entry", counted)
    return read


def test_a_new_key_skips_a_chain_its_bucket_s_marks_rule_out(tmp_path, monkeypatch):
    """4,000 keys in 4,096 buckets: 4,000 new keys would read every entry of the chains
    they fall in, about 4,000; the marks (one bit of 16 an entry) leave about 460."""
    root = str(tmp_path / "s")
    with Storage(root, StorageConfig(fsync=False, key_buckets=1 << 12)) as s:
        s.apply(1, lambda tx: tx.append([msg(H0 + k, key=f"k{k}") for k in range(4000)]))
        read = _entries_read(s, monkeypatch)
        ids = s.apply(2, lambda tx: tx.append([msg(H0 + k, key=f"new{k}") for k in range(4000)]))
        assert read[0] <= 800, read[0]
        assert s.apply(3, lambda tx: tx.append([msg(H0, key=f"new{k}") for k in range(4000)])) == ids
        check_store(s)


def test_the_marks_of_keys_gone_do_not_pile_up(tmp_path, monkeypatch):
    """Keys that live an hour, 20 an hour for 400 hours in 64 buckets: 8,000 entries
    written, about 40 live. Every bucket's marks would be full of the bits of keys long
    gone; once the cleaning cursor passes where the next marks began, they are the marks,
    so a new key's look-up walks about as often as the live keys call for."""
    root = str(tmp_path / "s")
    cfg = StorageConfig(fsync=False, key_window_ms=3_600_000, key_buckets=1 << 6, key_clean_slack=0)
    with Storage(root, cfg) as s:
        for h in range(1, 400):

            def step(tx, h=h):
                tx.seal_before(HOUR + h)
                tx.append([msg(H0 + h * 3_600_000 + k, key=f"h{h}-{k}") for k in range(20)])

            s.apply(h, step)
        assert s.meta(LIVE) <= 60
        assert np.count_nonzero(s.key_index.heads.marks == 0xFFFF) == 0
        read = _entries_read(s, monkeypatch)
        assert [s.lookup_key("orders", f"never{k}") for k in range(1000)] == [None] * 1000
        assert read[0] <= 1000, read[0]
        check_store(s)


def test_a_cleaning_rolled_back_before_the_heads_were_read_loses_no_key(tmp_path, monkeypatch):
    """The heads cache is read on first use. When that use was a cleaning step, it was
    read after the step moved the cursor in its batch, so the entries between the two
    cursors were never taken in; the batch rolled back (a full disk), and the heads held
    as whole lacked a live key: its look-up found nothing, and a produce stored it twice."""
    root = str(tmp_path / "s")
    cfg = StorageConfig(fsync=False, key_window_ms=3_600_000, key_buckets=1 << 4, key_clean_slack=0)
    with Storage(root, cfg) as s:
        s.apply(1, lambda tx: tx.append([msg(H0 + k, key=f"k{k}") for k in range(10)]))
    s = Storage(root, cfg)  # the heads file covers those ten
    (live,) = s.apply(2, lambda tx: tx.append([msg(H0 + 10 * 3_600_000, key="live")]))
    s.apply(3, lambda tx: tx.seal_before(HOUR + 2))  # the ten die
    s.sync()
    s.files.close_all()  # killed: the heads file still covers ten entries of eleven
    s.journal._file.close()
    s = Storage(root, cfg)

    def full(record, synced):
        raise StorageFullError("no space left")

    monkeypatch.setattr(s.journal, "append", full)
    with pytest.raises(StorageFullError):
        s.apply(4, lambda tx: tx.clean_keys(100))
    monkeypatch.undo()
    assert s.lookup_key("orders", "live") == live
    assert s.apply(4, lambda tx: tx.append([msg(H0 + 10 * 3_600_000, key="live")])) == [live]
    check_store(s)
    s.close()
