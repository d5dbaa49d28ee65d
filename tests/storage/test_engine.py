"""Determinism, validation, disk full, keys, retention, snapshots."""

from __future__ import annotations

import os

import pytest

from horologe.storage import (
    CorruptLogError,
    DeliverTimeOutOfRangeError,
    InvalidMessageError,
    MessageExpiredError,
    MessageId,
    ReadyEntry,
    SealedHourError,
    Storage,
    StorageConfig,
    StorageError,
    StorageFullError,
    UnknownMessageError,
    check_store,
)
from horologe.storage.hour_names import hour_name

from .helpers import H0, HOUR, msg, replica_state, tree_bytes


def feed(store: Storage) -> int:
    """Twenty batches spread over 50 hours, with keys, tags and cancels; returns the last index."""
    ri = 0
    for n in range(20):
        batch = [
            msg(
                H0 + (n * 7919 + i * 104729) % (50 * 3_600_000),
                body=bytes([n, i]),
                key=f"{n}/{i}" if i % 3 == 0 else None,
                tags=[f"t{i % 4}"],
            )
            for i in range(50)
        ]
        ri += 1
        ids = store.apply(ri, lambda tx, b=batch: tx.append(b))
        if n % 5 == 0:
            ri += 1
            store.apply(ri, lambda tx, i=ids: tx.cancel(i[3]))
    return ri


def test_same_batches_give_identical_bytes(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    cfg = StorageConfig(fsync=False, max_open_hours=2, max_cached_hours=4)

    def run(root, reopen_every):
        s = Storage(root, cfg)
        for ri in range(1, 30):
            batch = [
                msg(
                    H0 + (ri * 7919 + i * 104729) % (50 * 3_600_000),
                    body=bytes([ri, i]),
                    key=f"{ri}/{i}" if i % 3 == 0 else None,
                )
                for i in range(40)
            ]
            ids = s.apply(ri, lambda tx, b=batch: tx.append(b))
            if ri % 4 == 0:
                s.apply(ri + 0, lambda tx: None)  # a replay: must change nothing
            if reopen_every and ri % reopen_every == 0:
                s.close()
                s = Storage(root, cfg)
            del ids
        s.close()

    run(a, reopen_every=0)
    run(b, reopen_every=3)
    assert replica_state(a, cfg) == replica_state(b, cfg)


def test_invalid_messages_are_refused_before_any_write(tmp_path):
    root = str(tmp_path / "s")
    with Storage(root, StorageConfig(fsync=False)) as s:
        s.apply(1, lambda tx: tx.append([msg(H0)]))
        before = tree_bytes(root)
        big = msg(H0, body=b"x" * (256 * 1024 + 1))
        with pytest.raises(InvalidMessageError) as e:
            s.apply(2, lambda tx: tx.append([msg(H0 + 1), big]))
        assert e.value.field == "body"
        far = msg(H0 + 401 * 86_400_000)
        with pytest.raises(DeliverTimeOutOfRangeError):
            s.apply(2, lambda tx: tx.append([far]))
        with pytest.raises(DeliverTimeOutOfRangeError):
            s.apply(2, lambda tx: tx.append([msg(-5)]))
        assert tree_bytes(root) == before
        assert s.applied_index == 1


def test_failed_batch_midway_leaves_nothing(tmp_path):
    root = str(tmp_path / "s")
    with Storage(root, StorageConfig(fsync=False)) as s:
        ids = s.apply(1, lambda tx: tx.append([msg(H0, key="k")]))
        before = tree_bytes(root)

        def half_then_fail(tx):
            tx.append([msg(H0 + 9 * 3_600_000, key="other"), msg(H0 + 1)])
            tx.cancel(MessageId(HOUR + 77, 0))  # no such message: fails after writes

        with pytest.raises(UnknownMessageError):
            s.apply(2, half_then_fail)
        assert tree_bytes(root) == before
        assert s.lookup_key("orders", "other") is None
        assert s.lookup_key("orders", "k") == ids[0]
        assert s.bucket(HOUR).count == 1
        check_store(s)


@pytest.fixture
def tiny_fs(tmp_path, mount_tmpfs):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    return mount_tmpfs(str(mnt), "512k")


@pytest.mark.root
def test_disk_full_rolls_back_the_whole_batch(tiny_fs):
    root = os.path.join(tiny_fs, "s")
    s = Storage(root, StorageConfig(fsync=True))
    stored = {}
    ri = 0
    with pytest.raises(StorageFullError):
        while True:
            ri += 1
            batch = [msg(H0 + ri * 1000 + i, body=os.urandom(2000)) for i in range(20)]
            ids = s.apply(ri, lambda tx, b=batch: tx.append(b))
            stored.update({mid: m.body for mid, m in zip(ids, batch, strict=False)})
    assert s.applied_index == ri - 1
    assert s.bucket(HOUR).count == len(stored)
    check_store(s)
    s.close()
    s = Storage(root)
    assert s.recovered == []
    for mid, body in stored.items():
        assert s.read_message(mid).message.body == body
    check_store(s)
    s.close()


def test_a_key_dedupes_until_its_hour_was_delivered_for_the_window(tmp_path):
    cfg = StorageConfig(fsync=False, key_window_ms=3_600_000)
    with Storage(str(tmp_path / "s"), cfg) as s:
        first = s.apply(1, lambda tx: tx.append([msg(H0 + 10, key="order-1")]))[0]
        again = s.apply(2, lambda tx: tx.append([msg(H0 + 99, key="order-1", body=b"retry")]))[0]
        assert again == first
        assert s.bucket(HOUR).count == 1
        both = s.apply(3, lambda tx: tx.append([msg(H0 + 5, key="x"), msg(H0 + 6, key="x")]))
        assert both[0] == both[1]
        other_topic = s.apply(4, lambda tx: tx.append([msg(H0, key="order-1", topic="pay")]))[0]
        assert other_topic != first
        # hour HOUR delivered (sealed): for the 1 h window after, the key still holds
        s.apply(5, lambda tx: tx.seal_before(HOUR + 1))
        assert s.lookup_key("orders", "order-1") == first
        s.apply(6, lambda tx: tx.seal_before(HOUR + 2))  # delivery passed HOUR + 2: over an hour ago
        assert s.lookup_key("orders", "order-1") is None
        later = H0 + 3 * 3_600_000 + 1
        fresh = s.apply(7, lambda tx: tx.append([msg(later, key="order-1", produced_at_ms=later)]))[0]
        assert fresh != first and s.lookup_key("orders", "order-1") == fresh
        check_store(s)


def test_retention_and_sealing(tmp_path):
    with Storage(str(tmp_path / "s"), StorageConfig(fsync=False)) as s:
        ids = s.apply(1, lambda tx: tx.append([msg(H0 + h * 3_600_000) for h in range(4)]))
        s.apply(2, lambda tx: tx.seal_before(HOUR + 2))
        with pytest.raises(SealedHourError):
            s.apply(3, lambda tx: tx.append([msg(H0 + 1)]))
        with pytest.raises(SealedHourError):
            s.apply(3, lambda tx: tx.cancel(ids[0]))
        s.apply(3, lambda tx: tx.drop_hours_before(HOUR + 5))  # clamped to the sealed hours
        assert s.hours() == [HOUR + 2, HOUR + 3]
        with pytest.raises(MessageExpiredError):
            s.read_message(ids[0])
        assert s.read_message(ids[2]).message.deliver_at_ms == H0 + 2 * 3_600_000
        left = {n.split(".")[0] for n in os.listdir(os.path.join(s.directory, "delay"))}
        assert left == {hour_name(HOUR + 2), hour_name(HOUR + 3)}
        check_store(s)


def test_snapshot_restores_a_self_contained_copy(tmp_path):
    src = str(tmp_path / "src")
    with Storage(src, StorageConfig(fsync=False)) as s:
        feed(s)
        s.apply(5000, lambda tx: tx.seal_before(HOUR + 10))
        s.apply(5001, lambda tx: tx.append_ready("orders", [ReadyEntry(HOUR, 0, 0, H0, H0)]))
        s.snapshot(str(tmp_path / "snap"))
        expected = check_store(s)
        s.apply(5002, lambda tx: tx.append([msg(H0 + 20 * 3_600_000, body=b"after the snapshot")]))
    other = str(tmp_path / "other")
    with Storage(other, StorageConfig(fsync=False)) as o:
        o.apply(1, lambda tx: tx.append([msg(H0, body=b"to be replaced")]))
        o.restore(str(tmp_path / "snap"))
        assert o.applied_index == 5001
        assert check_store(o) == expected
        o.apply(5002, lambda tx: tx.append([msg(H0 + 20 * 3_600_000, body=b"after the snapshot")]))
    with Storage(src) as s:
        check_store(s)
    # the snapshot still reads as it was, though it shares files with src, which grew since
    with Storage(str(tmp_path / "snap"), read_only=True) as snap:
        assert snap.applied_index == 5001
        assert check_store(snap) == expected


def test_a_snapshot_links_every_file_instead_of_copying(tmp_path):
    """O(files) under the apply lock, however much is pending in unsealed hours."""
    src = str(tmp_path / "src")
    with Storage(src, StorageConfig(fsync=False)) as s:
        feed(s)
        s.apply(5000, lambda tx: tx.append([msg(H0 + 40 * 3_600_000, body=b"far ahead")]))
        written = s.snapshot(str(tmp_path / "snap"))
    unsealed = [rel for rel in written if rel.startswith("delay/")]
    assert unsealed
    for rel in written:
        assert os.stat(os.path.join(src, rel)).st_ino == os.stat(tmp_path / "snap" / rel).st_ino, rel


def test_malformed_and_unknown_ids(tmp_path):
    with Storage(str(tmp_path / "s"), StorageConfig(fsync=False)) as s:
        s.apply(1, lambda tx: tx.append([msg(H0)]))
        for bad in ("", "xyz", "0" * 15, "g" * 16):
            with pytest.raises(UnknownMessageError):
                MessageId.parse(bad)
        with pytest.raises(UnknownMessageError):
            s.read_message(MessageId(HOUR, 1))
        with pytest.raises(UnknownMessageError):
            s.read_message(MessageId(HOUR + 3, 0))
        assert str(MessageId(HOUR, 0)) == f"{HOUR:08x}00000000"


def test_read_only_open_changes_nothing(tmp_path):
    root = str(tmp_path / "s")
    with Storage(root, StorageConfig(fsync=False)) as s:
        ids = s.apply(1, lambda tx: tx.append([msg(H0 + k * 1000) for k in range(5)]))
    with open(os.path.join(root, "commits.log"), "ab") as f:
        f.write(b"\x05\x00\x00\x00torn")  # a write in flight on a live node
    before = tree_bytes(root)
    with Storage(root, read_only=True) as ro:
        assert ro.read_message(ids[3]).message.deliver_at_ms == H0 + 3000
        assert check_store(ro).messages == 5
        with pytest.raises(StorageError):
            ro.apply(2, lambda tx: None)
    assert tree_bytes(root) == before
    with pytest.raises(StorageError):
        Storage(str(tmp_path / "nothing"), read_only=True)


def test_a_ready_read_verifies_what_it_reads_not_the_log_before_it(tmp_path):
    """The first read of a long ready log after start costs what it reads (no rescan
    from offset 0 under the apply lock); damage elsewhere is still found when read."""
    path = str(tmp_path / "s")
    n = 3 * 65_536 + 10
    with Storage(path, StorageConfig(fsync=False)) as s:
        s.apply(1, lambda tx: tx.append_ready("orders", [ReadyEntry(HOUR, k, 0, H0, H0) for k in range(n)]))
        rel = next(r for r in s.journal.state.files if r.startswith("ready/"))
    with open(os.path.join(path, rel), "r+b") as f:  # damage entry 0's bytes
        f.seek(16)
        f.write(b"\xff\xff")
    with Storage(path, StorageConfig(fsync=False)) as s:
        assert len(s.read_ready("orders", n - 10, n)) == 10
        with pytest.raises(CorruptLogError):
            s.read_ready("orders", 0, 5)


@pytest.mark.parametrize("renames_before_the_crash", [0, 1, 3, 6, 40])
def test_a_restore_cut_short_is_finished_or_undone_at_the_next_open(
    tmp_path, monkeypatch, renames_before_the_crash
):
    """A restore renames nothing above the store's folder (it may be a mount point); a crash
    at any rename leaves a store that opens as the old one or as the snapshot, whole."""
    src = str(tmp_path / "src")
    with Storage(src, StorageConfig(fsync=False)) as s:
        feed(s)
        s.snapshot(str(tmp_path / "snap"))
        expected = check_store(s)
        restored_index = s.applied_index
    other = str(tmp_path / "other")
    with Storage(other, StorageConfig(fsync=False)) as o:
        o.apply(1, lambda tx: tx.append([msg(H0, body=b"to be replaced")]))
        old = check_store(o)
    calls = {"n": 0}
    real_rename = os.rename

    def crashing_rename(a, b):
        if calls["n"] == renames_before_the_crash:
            raise KeyboardInterrupt("power cut")
        calls["n"] += 1
        real_rename(a, b)

    o = Storage(other, StorageConfig(fsync=False))
    monkeypatch.setattr(os, "rename", crashing_rename)
    try:
        o.restore(str(tmp_path / "snap"))
        crashed = False
    except KeyboardInterrupt:
        crashed = True
    monkeypatch.setattr(os, "rename", real_rename)
    with Storage(other, StorageConfig(fsync=False)) as again:
        report = check_store(again)
        assert report in (old, expected)
        assert again.applied_index == (1 if report == old else restored_index)
        if crashed and renames_before_the_crash > 0:  # the copy was whole: it was finished
            assert again.applied_index == restored_index
    assert sorted(os.listdir(other)) == sorted(n for n in os.listdir(src) if not n.endswith(".lock"))


@pytest.mark.root
def test_a_store_on_its_own_mount_point_restores(tmp_path, mount_tmpfs):
    """A store kept on a volume of its own (a tmpfs here): restore cannot rename its folder
    (EBUSY), and links from the snapshot's filesystem fail over to copies."""
    src = str(tmp_path / "src")
    with Storage(src, StorageConfig(fsync=False)) as s:
        feed(s)
        s.apply(5000, lambda tx: tx.seal_before(HOUR + 10))
        s.snapshot(str(tmp_path / "snap"))
        expected = check_store(s)
    other = str(tmp_path / "other")
    os.makedirs(other)
    mount_tmpfs(other, "64m")
    with Storage(other, StorageConfig(fsync=False)) as o:
        o.apply(1, lambda tx: tx.append([msg(H0, body=b"to be replaced")]))
        o.restore(str(tmp_path / "snap"))
        assert o.applied_index == 5000 and check_store(o) == expected
    with Storage(other) as o:
        assert check_store(o) == expected
