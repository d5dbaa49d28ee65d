"""Retention in storage: ready logs trimmed a segment at a time with offsets kept, hours cut
only when no held ready entry names them, snapshots after a cut, the same bytes everywhere."""

from __future__ import annotations

import os

import numpy as np
import pytest

from horologe.storage import (
    MessageExpiredError,
    ReadyEntry,
    ReadyTrimmedError,
    Storage,
    StorageConfig,
    check_store,
    file_table,
)
from horologe.storage.hour_names import hour_name

from .helpers import H0, HOUR, msg, replica_state, tree_bytes

CFG = StorageConfig(fsync=False, ready_segment_entries=10)


def delivered(ids, at_ms=H0) -> list[ReadyEntry]:
    return [ReadyEntry(m.hour, m.global_index, 0, H0, at_ms) for m in ids]


def fill(s: Storage) -> list:
    """30 messages over hours HOUR..HOUR+2, all delivered (sealed), 25 of them in the ready
    log of "orders" (three batches, so segments of 10 fill across batches)."""
    ids = s.apply(1, lambda tx: tx.append([msg(H0 + k * 360_000, key=f"k{k}") for k in range(30)]))
    s.apply(2, lambda tx: tx.seal_before(HOUR + 3))
    for ri, part in ((3, ids[:7]), (4, ids[7:19]), (5, ids[19:25])):
        s.apply(ri, lambda tx, p=part: tx.append_ready("orders", delivered(p)))
    return ids


def ready_files(root: str) -> list[str]:
    return sorted(os.listdir(os.path.join(root, "ready")))


def test_trimming_drops_whole_segments_and_keeps_offsets(tmp_path):
    root = str(tmp_path / "s")
    with Storage(root, CFG) as s:
        fill(s)
        assert ready_files(root) == ["0.0.rdy", "0.10.rdy", "0.20.rdy"]
        before = s.read_ready("orders")
        assert s.apply(6, lambda tx: tx.trim_ready("orders", 17)) == 10  # the segment [10, 20) is held
        assert ready_files(root) == ["0.10.rdy", "0.20.rdy"]
        assert s.ready_base("orders") == 10 and s.ready_count("orders") == 25
        assert np.array_equal(s.read_ready("orders"), before[10:])
        assert np.array_equal(s.read_ready("orders", 12, 14), before[12:14])
        with pytest.raises(ReadyTrimmedError) as e:
            s.read_ready("orders", 9, 12)
        assert e.value.base == 10
        ids = s.apply(7, lambda tx: tx.append([msg(H0 + 4 * 3_600_000)]))
        assert s.apply(8, lambda tx: tx.append_ready("orders", delivered(ids))) == 25
        check_store(s)
    with Storage(root, CFG) as s:
        assert s.ready_base("orders") == 10 and s.ready_count("orders") == 26
        assert np.array_equal(s.read_ready("orders", 10, 25), before[10:])
        # every segment passed: none left, and the offsets still go on from where they were
        assert s.apply(9, lambda tx: tx.trim_ready("orders", 26)) == 26
        assert ready_files(root) == [] and s.ready_count("orders") == 26
        assert len(s.read_ready("orders")) == 0
        s.apply(10, lambda tx: tx.append_ready("orders", delivered(ids)))
        assert ready_files(root) == ["0.26.rdy"]
        assert s.read_ready("orders")["hour"].tolist() == [HOUR + 4]
        check_store(s)


def test_an_hour_is_cut_only_once_no_held_ready_entry_names_it(tmp_path):
    root = str(tmp_path / "s")
    with Storage(root, CFG) as s:
        ids = fill(s)
        # hours HOUR, HOUR+1, HOUR+2 hold 10 messages each; the ready log names all three
        assert s.apply(6, lambda tx: tx.drop_hours_before(HOUR + 3)) == HOUR  # nothing before it
        assert s.hours() == [HOUR, HOUR + 1, HOUR + 2]
        s.apply(7, lambda tx: tx.trim_ready("orders", 10))  # entries 0..9: hour HOUR only
        assert s.apply(8, lambda tx: tx.drop_hours_before(HOUR + 3)) == HOUR + 1
        assert s.hours() == [HOUR + 1, HOUR + 2]
        with pytest.raises(MessageExpiredError):
            s.read_message(ids[0])
        assert s.read_message(ids[10]).message.body == b"payload"
        # keys of a removed hour are gone with it; the others hold
        assert s.lookup_key("orders", "k0") is None and s.lookup_key("orders", "k10") == ids[10]
        # a DLQ-like entry appended now, naming an older retained hour, holds that hour back
        s.apply(9, lambda tx: tx.append_ready("%DLQ%g", delivered([ids[12]])))
        s.apply(10, lambda tx: tx.trim_ready("orders", 25))
        assert s.apply(11, lambda tx: tx.drop_hours_before(HOUR + 3)) == HOUR + 1
        s.apply(12, lambda tx: tx.trim_ready("%DLQ%g", 1))
        assert s.apply(13, lambda tx: tx.drop_hours_before(HOUR + 3)) == HOUR + 3
        assert s.hours() == []
        check_store(s)


def test_never_past_the_sealed_hours(tmp_path):
    with Storage(str(tmp_path / "s"), CFG) as s:
        fill(s)
        s.apply(6, lambda tx: tx.trim_ready("orders", 25))
        s.apply(7, lambda tx: tx.append([msg(H0 + 5 * 3_600_000)]))
        assert s.apply(8, lambda tx: tx.drop_hours_before(HOUR + 9)) == HOUR + 3
        assert s.hours() == [HOUR + 5]
        check_store(s)


def test_a_snapshot_after_a_cut_restores_and_goes_on(tmp_path):
    src = str(tmp_path / "src")
    with Storage(src, CFG) as s:
        fill(s)
        s.apply(6, lambda tx: tx.trim_ready("orders", 20))
        s.apply(7, lambda tx: tx.drop_hours_before(HOUR + 3))
        s.snapshot(str(tmp_path / "snap"))
        expected = check_store(s)
        later = lambda tx: tx.append_ready("orders", delivered(tx.append([msg(H0 + 5 * 3_600_000)])))  # noqa: E731
        s.apply(8, later)
        s.apply(9, lambda tx: tx.trim_ready("orders", 26))
    assert sorted(os.listdir(tmp_path / "snap" / "ready")) == ["0.20.rdy"]
    other = str(tmp_path / "other")
    with Storage(other, CFG) as o:
        o.restore(str(tmp_path / "snap"))
        assert check_store(o) == expected
        assert o.ready_base("orders") == 20 and o.ready_count("orders") == 25
        assert o.hours() == [HOUR + 2] and o.meta("retained_from_hour") == HOUR + 2
        o.apply(8, later)
        o.apply(9, lambda tx: tx.trim_ready("orders", 26))
    with Storage(str(tmp_path / "snap"), read_only=True) as snap:  # unharmed by the later cut
        assert check_store(snap) == expected

    def committed(root):  # the data files (the journals differ: one was restored from a checkpoint)
        return {k: v for k, v in tree_bytes(root).items() if not k.endswith((".heads", "commits.log"))}

    assert committed(src) == committed(other)


def test_replicas_cut_to_the_same_bytes(tmp_path):
    def run(root: str, reopen: bool) -> dict:
        s = Storage(root, CFG)
        steps = [
            lambda tx: fill_step(tx, 0),
            lambda tx: fill_step(tx, 1),
            lambda tx: tx.trim_ready("orders", 13),
            lambda tx: tx.drop_hours_before(HOUR + 9),
            lambda tx: fill_step(tx, 2),
            lambda tx: tx.trim_ready("orders", 40),
            lambda tx: tx.drop_hours_before(HOUR + 9),
        ]
        for ri, step in enumerate(steps, 1):
            s.apply(ri, step)
            if reopen:
                s.close()
                s = Storage(root, CFG)
        check_store(s)
        s.close()
        return replica_state(root, CFG)

    def fill_step(tx, n: int) -> None:
        tx.seal_before(HOUR + 3 * n)
        ids = tx.append([msg(H0 + (3 * n + k % 3) * 3_600_000 + k, key=f"{n}/{k}") for k in range(12)])
        tx.append_ready("orders", delivered(ids))

    assert run(str(tmp_path / "a"), False) == run(str(tmp_path / "b"), True)


def test_a_quiet_topic_rolls_its_segments_by_the_hour_and_holds_nothing_back(tmp_path):
    """A few deliveries a day never fill a segment; without the hourly roll its tail would
    hold every old entry, and so every hour they name, for ever."""
    root = str(tmp_path / "s")
    with Storage(root, StorageConfig(fsync=False)) as s:
        ids = s.apply(1, lambda tx: tx.append([msg(H0 + h * 3_600_000) for h in range(4)]))
        s.apply(2, lambda tx: tx.seal_before(HOUR + 4))
        for h in range(4):  # one delivery per hour, on the hour
            at = H0 + h * 3_600_000 + 10
            s.apply(3 + h, lambda tx, h=h, at=at: tx.append_ready("quiet", delivered([ids[h]], at)))
        assert ready_files(root) == ["1.0.rdy", "1.1.rdy", "1.2.rdy", "1.3.rdy"]  # "orders" is 0
        s.apply(7, lambda tx: tx.trim_ready("quiet", 2))
        assert s.apply(8, lambda tx: tx.drop_hours_before(HOUR + 4)) == HOUR + 2
        assert s.hours() == [HOUR + 2, HOUR + 3] and s.ready_base("quiet") == 2
        check_store(s)


def _cut_an_hour(root: str) -> str:
    """A store whose first hour retention removed; that hour's log file's path."""
    s = Storage(root, CFG)
    fill(s)
    s.apply(6, lambda tx: tx.trim_ready("orders", 10))
    log = os.path.join(root, "delay", hour_name(HOUR) + ".log")
    assert os.path.exists(log)
    assert s.apply(7, lambda tx: tx.drop_hours_before(HOUR + 3)) == HOUR + 1
    s.close()
    return log


def test_the_files_a_removal_unlinks_are_gone_for_good_once_it_returns(tmp_path, monkeypatch):
    """The unlinks came after the removal's sync point, and no folder was fsynced after
    them: a power loss then brought the files back, hours of messages each."""
    seen = []

    def fsync_dir(path: str) -> None:
        seen.append((os.path.basename(path), sorted(os.listdir(path))))

    monkeypatch.setattr(file_table, "fsync_dir", fsync_dir)
    root = str(tmp_path / "s")
    log = _cut_an_hour(root)
    gone = os.path.basename(log)
    assert any(folder == "delay" and gone not in names for folder, names in seen)  # fsynced once gone
    assert not os.path.exists(log)


def test_a_file_a_removal_left_behind_is_set_aside_whole_without_a_copy(tmp_path):
    """An hour's log, gigabytes, back after a crash between the removal's sync point and its
    unlink (or its folder's fsync): open copied it whole into torn/, read into memory and
    written out again, on a disk retention was freeing."""
    root = str(tmp_path / "s")
    log = _cut_an_hour(root)
    with open(log, "wb") as f:  # the unlink never reached the disk
        f.write(b"x" * 4096)
    inode = os.stat(log).st_ino
    s = Storage(root, CFG)
    (aside,) = os.listdir(os.path.join(root, "torn"))
    assert os.stat(os.path.join(root, "torn", aside)).st_ino == inode  # moved, not copied
    assert not os.path.exists(log) and any("4096 uncommitted bytes" in line for line in s.recovered)
    check_store(s)
    s.close()


def test_a_read_only_open_beside_a_writer_whose_trim_removes_a_file_meanwhile(tmp_path, monkeypatch):
    """The audit and `storage inspect` open a live node's store read-only: a trim that
    removed a segment between their read of commits.log and their look at the files it
    names made the open fail as if the store were damaged (CorruptLogError)."""
    from horologe.storage import commit_journal

    root = str(tmp_path / "s")
    with Storage(root, CFG) as writer:
        fill(writer)
        opened = commit_journal.CommitJournal.open

        def read_then_trimmed(journal, read_only=False):
            opened(journal, read_only)
            if read_only and os.path.exists(os.path.join(root, "ready", "0.0.rdy")):
                writer.apply(6, lambda tx: tx.trim_ready("orders", 17))  # the writer goes on meanwhile

        monkeypatch.setattr(commit_journal.CommitJournal, "open", read_then_trimmed)
        with Storage(root, CFG, read_only=True) as reader:
            assert reader.ready_base("orders") == 10
