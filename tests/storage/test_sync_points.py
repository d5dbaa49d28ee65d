"""Sync points (storage/commit_journal.py): the store fsyncs at sync points only, and an
open after a crash goes back to the last one, whose batches the Raft log replays.

A crash here is a store dropped without ``close()``: its files are whole in the page
cache, so these tests show the rollback and the replay; power loss itself (unsynced
writes gone) is chaos_tests' ``power_loss`` scenario on a FUSE layer.
"""

from __future__ import annotations

import os

import msgpack
import pytest

from horologe.storage import Storage, StorageConfig, check_store
from horologe.storage.commit_journal import JOURNAL_NAME
from horologe.storage.errors import CorruptLogError
from horologe.storage.framing import FRAME_OVERHEAD, scan_frames
from horologe.storage.magic import MAGIC_SIZE

from .helpers import H0, HOUR, msg, replica_state

# No sync point by size or count unless a test wants one.
CFG = StorageConfig(sync_every_bytes=1 << 30, sync_every_batches=1 << 30)


def _batch(ri: int) -> list:
    return [msg(H0 + (ri % 4) * 3_600_000 + k, body=bytes([ri, k]) * 50, key=f"{ri}/{k}") for k in range(10)]


def _apply(s: Storage, first: int, last: int) -> None:
    for ri in range(first, last + 1):
        s.apply(ri, lambda tx, ri=ri: tx.append(_batch(ri)))


def _sync_points(s: Storage, first: int, last: int) -> list[int]:
    """Apply batches ``first..last`` one by one; those that were sync points."""
    synced_at = []
    for ri in range(first, last + 1):
        _apply(s, ri, ri)
        if not s.journal.unsynced:
            synced_at.append(ri)
    return synced_at


def _crash(s: Storage) -> None:
    """Drop the store as a killed process would: fds closed, nothing synced or saved."""
    s.files.close_all()
    s.journal._file.close()


def test_a_crash_goes_back_to_the_last_sync_point_and_a_replay_makes_the_same_store(tmp_path):
    crashed, clean = str(tmp_path / "crashed"), str(tmp_path / "clean")
    s = Storage(crashed, CFG)
    _apply(s, 1, 5)
    s.sync()
    _apply(s, 6, 9)  # unsynced; one of them opens a new hour file
    s.apply(10, lambda tx: tx.append([msg(H0 + 9 * 3_600_000)]))
    _crash(s)

    s = Storage(crashed, CFG)
    assert s.applied_index == 5
    assert any("back at the last sync point, index 5" in line for line in s.recovered), s.recovered
    assert not os.path.exists(os.path.join(crashed, "torn"))  # cut, not set aside: Raft replays it
    assert HOUR + 9 not in s.hours()
    check_store(s)
    _apply(s, 6, 9)  # what the Raft log replays
    s.apply(10, lambda tx: tx.append([msg(H0 + 9 * 3_600_000)]))
    s.close()

    with Storage(clean, CFG) as c:
        _apply(c, 1, 9)
        c.apply(10, lambda tx: tx.append([msg(H0 + 9 * 3_600_000)]))
    assert replica_state(crashed, CFG) == replica_state(clean, CFG)


def test_without_sync_points_since_open_a_crash_keeps_what_close_synced(tmp_path):
    root = str(tmp_path / "s")
    with Storage(root, CFG) as s:
        _apply(s, 1, 3)
    s = Storage(root, CFG)
    assert s.applied_index == 3 and not s.recovered
    _apply(s, 4, 4)
    _crash(s)
    s = Storage(root, CFG)
    assert s.applied_index == 3
    check_store(s)
    s.close()


def test_a_checkpoint_record_is_a_sync_point(tmp_path):
    """A Raft dump is built on it and lets Raft drop the entries it covers."""
    root = str(tmp_path / "s")
    s = Storage(root, CFG)
    _apply(s, 1, 4)
    record = s.checkpoint_record()
    assert record["ri"] == 4
    _crash(s)
    s = Storage(root, CFG)
    assert s.applied_index == 4 and not s.recovered
    s.close()


def test_a_sync_point_comes_every_so_many_bytes(tmp_path):
    root = str(tmp_path / "s")
    config = StorageConfig(sync_every_bytes=5_000)  # a batch appends 2.5–5 KB (keys included)
    s = Storage(root, config)
    synced_at = _sync_points(s, 1, 11)
    assert synced_at == [2, 4, 6, 8, 10], synced_at  # every other batch crosses 5,000 bytes
    _crash(s)
    s = Storage(root, config)
    assert s.applied_index == synced_at[-1]
    s.close()


def test_a_sync_point_comes_every_so_many_batches_however_small(tmp_path):
    """So that a crash after a long run of small batches (single produces, acks) replays
    a bounded number of them, not every one since the last 8 MiB."""
    root = str(tmp_path / "s")
    config = StorageConfig(sync_every_bytes=1 << 30, sync_every_batches=4)
    s = Storage(root, config)
    synced_at = _sync_points(s, 1, 11)
    assert synced_at == [4, 8], synced_at
    s.sync()  # an explicit sync point starts the count again
    _apply(s, 12, 14)
    assert s.journal.unsynced
    _apply(s, 15, 15)
    assert not s.journal.unsynced
    _crash(s)
    s = Storage(root, config)
    assert s.applied_index == 15
    s.close()


def test_a_batch_that_removes_files_is_a_sync_point(tmp_path):
    """Its files are unlinked once its frame is written: a frame open could drop must not
    name a file that is gone."""
    root = str(tmp_path / "s")
    s = Storage(root, CFG)
    _apply(s, 1, 4)
    s.apply(5, lambda tx: tx.seal_before(HOUR + 2))
    s.apply(6, lambda tx: tx.drop_hours_before(HOUR + 2))
    assert not s.journal.unsynced
    _crash(s)
    s = Storage(root, CFG)
    assert s.applied_index == 6 and HOUR not in s.hours()
    check_store(s)
    s.close()


def test_every_batch_is_a_sync_point_with_fsync_on(tmp_path):
    root = str(tmp_path / "s")
    s = Storage(root, StorageConfig(fsync=True))
    _apply(s, 1, 3)
    _crash(s)
    s = Storage(root, StorageConfig(fsync=True))
    assert s.applied_index == 3 and not s.recovered
    s.close()


def test_a_reader_beside_the_writer_sees_unsynced_batches(tmp_path):
    root = str(tmp_path / "s")
    s = Storage(root, CFG)
    _apply(s, 1, 3)
    with Storage(root, read_only=True) as r:
        assert r.applied_index == 3
    s.close()


# -- writes lost out of order ----------------------------------------------------------
# A power loss keeps whatever the disk wrote back of what was not fsynced, in no order
# (its cache and the kernel's write-back reorder pages): a frame past the last sync point
# can survive while an earlier one comes back as zeros.

SECTOR = 512


def _frames(root: str) -> list[tuple[int, int, int, bool]]:
    """(ri, offset, end, sync point) of each frame of the store's commits.log."""
    path = os.path.join(root, JOURNAL_NAME)
    with open(path, "rb") as f:
        buf = f.read()
    out = []
    for offset, payload in scan_frames(buf, MAGIC_SIZE, path):
        rec = msgpack.unpackb(payload)
        out.append((rec["ri"], offset, offset + FRAME_OVERHEAD + len(payload), not rec.get("u")))
    return out


def _frame_of(root: str, ri: int) -> tuple[int, int]:
    return next((offset, end) for i, offset, end, _ in _frames(root) if i == ri)


def _zero(root: str, start: int, stop: int) -> None:
    with open(os.path.join(root, JOURNAL_NAME), "r+b") as f:
        f.seek(start)
        f.write(bytes(stop - start))


def _crash_past_a_sync_point(root: str, last: int) -> None:
    """Batches 1..5, a sync point, batches 6..``last``, then a crash."""
    s = Storage(root, CFG)
    _apply(s, 1, 5)
    s.sync()
    _apply(s, 6, last)
    _crash(s)


def test_unsynced_frames_lost_out_of_order_go_back_to_the_last_sync_point(tmp_path):
    """The sector holding batch 8's frame comes back as it was before (zeros from where
    batch 8 began), later sectors as written. Nothing past the sync point was fsynced, so
    open goes back to it, as after any crash, and the Raft log replays the rest."""
    crashed, clean = str(tmp_path / "crashed"), str(tmp_path / "clean")
    _crash_past_a_sync_point(crashed, 14)
    start, _ = _frame_of(crashed, 8)
    stop = (start // SECTOR + 1) * SECTOR
    assert any(offset >= stop for _, offset, _, _ in _frames(crashed))  # whole frames after it
    _zero(crashed, start, stop)
    s = Storage(crashed, CFG)
    assert s.applied_index == 5
    assert any("back at the last sync point, index 5" in line for line in s.recovered), s.recovered
    assert any(f"writes lost at {start}" in line for line in s.recovered), s.recovered
    check_store(s)
    _apply(s, 6, 14)  # what the Raft log replays
    s.close()
    with Storage(clean, CFG) as c:
        _apply(c, 1, 14)
    assert replica_state(crashed, CFG) == replica_state(clean, CFG)


def _crash_past_two_sync_points(root: str) -> None:
    """Batches 1..5, a sync point, 6..8, a sync point, batch 9, then a crash."""
    s = Storage(root, CFG)
    _apply(s, 1, 5)
    s.sync()
    _apply(s, 6, 8)
    s.sync()
    _apply(s, 9, 9)
    _crash(s)


def test_a_lost_write_before_a_sync_point_that_another_frame_follows_is_corruption(tmp_path):
    """A frame after a sync point was written once that sync point's fsync returned, and
    that fsync made every byte before it durable: damage there is not a lost write."""
    root = str(tmp_path / "s")
    _crash_past_two_sync_points(root)
    _zero(root, *_frame_of(root, 7))
    with pytest.raises(CorruptLogError):
        Storage(root, CFG)


def test_a_bad_checksum_past_the_last_sync_point_with_whole_lengths_is_corruption(tmp_path):
    """A lost write leaves zeros (a sector as it was before, or never written); a frame
    whose lengths agree and none of whose sectors is empty, yet whose checksum fails, is
    damage a crash does not leave."""
    root = str(tmp_path / "s")
    _crash_past_a_sync_point(root, 9)
    start, _ = _frame_of(root, 7)
    with open(os.path.join(root, JOURNAL_NAME), "r+b") as f:
        f.seek(start + 8)
        b = f.read(1)
        f.seek(start + 8)
        f.write(bytes([b[0] ^ 0x10]))
    with pytest.raises(CorruptLogError):
        Storage(root, CFG)


def test_a_length_that_runs_past_the_end_with_whole_frames_after_it_is_corruption(tmp_path):
    """A frame whose length claims more bytes than the file holds is a torn tail only when
    nothing whole follows it. Frame 7's length damaged (a high bit flipped), before a
    sync point that another frame follows: open set frames 7 to 9 aside as a torn tail
    and went back to index 6, dropping batches whose sync point was on disk."""
    root = str(tmp_path / "s")
    _crash_past_two_sync_points(root)
    start, _ = _frame_of(root, 7)
    with open(os.path.join(root, JOURNAL_NAME), "r+b") as f:
        f.seek(start + 3)
        f.write(b"\x40")  # the length's high byte
    with pytest.raises(CorruptLogError):
        Storage(root, CFG)


def test_a_state_larger_than_the_journal_s_bound_is_restated_once_not_at_every_batch(tmp_path, monkeypatch):
    """The journal is rewritten as one checkpoint once it grows past ``journal_compact_bytes``;
    a state larger than that (schedules' definitions in meta, bodies and all) made every
    checkpoint past the bound already: every batch was a sync point and rewrote the whole
    journal (50 rewrites in 50 batches here)."""
    cfg = StorageConfig(fsync=False, journal_compact_bytes=64 * 1024)
    s = Storage(str(tmp_path / "s"), cfg)
    s.apply(1, lambda tx: tx.set_meta("schedules", "x" * 100_000))  # the state: 100 kB
    rewrites = [0]
    write = s.journal.write_checkpoint

    def counted(state, directory=None):
        rewrites[0] += 1
        write(state, directory)

    monkeypatch.setattr(s.journal, "write_checkpoint", counted)
    for ri in range(2, 52):
        s.apply(ri, lambda tx, ri=ri: tx.set_meta("n", ri))
    assert rewrites[0] <= 1
    s.close()
    s = Storage(str(tmp_path / "s"), cfg)
    assert s.applied_index == 51 and s.meta("n") == 51 and len(s.meta("schedules")) == 100_000
    s.close()
