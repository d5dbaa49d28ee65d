"""The Raft journal on disk: what pysyncobj reads back, recovery on open, and its memory bound."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import pickle
import time
import tracemalloc

import pysyncobj.syncobj
import pytest
from pysyncobj.journal import FileJournal, MetaStorer

from horologe.cluster import SYNC, ClusterSettings, Entry, StateMachine
from horologe.cluster.errors import StaleJournalViewError
from horologe.cluster.raft.journal import ENTRY_HEAD, ENTRY_OVERHEAD, DiskJournal
from horologe.cluster.raft.loop_crossing import LoopCrossing
from horologe.cluster.raft.node import RaftNode
from horologe.storage import Storage, durable
from horologe.storage.errors import CorruptLogError, FsyncFailedError
from horologe.storage.framing import FRAME_HEAD, SECTOR, frame
from horologe.storage.magic import MAGIC_SIZE
from horologe.wheel import Watermark
from testkit.process_cluster import free_ports

MiB = 1024 * 1024


def _command(k: int, size: int = 100) -> bytes:
    return (b"%08d" % k) * (size // 8) + b"!" * (size % 8)


def _entries(count: int, size: int = 100, first_idx: int = 1, term: int = 1) -> list[tuple[bytes, int, int]]:
    return [(_command(k, size + k % 7), first_idx + k, term + k // 10) for k in range(count)]


def _journal(tmp_path, entries=(), **kw) -> DiskJournal:
    j = DiskJournal(str(tmp_path / "journal"), **kw)
    for e in entries:
        j.add(*e)
    return j


def _reopen(j: DiskJournal, **kw) -> DiskJournal:
    j.close()
    return DiskJournal(j.path, **kw)


def test_entries_read_back_before_and_after_reopen(tmp_path):
    expected = _entries(40)
    j = _journal(tmp_path, expected)
    assert len(j) == 40 and [j[k] for k in range(40)] == expected
    assert j.bytes == sum(len(c) for c, _, _ in expected)
    j = _reopen(j)
    assert len(j) == 40 and list(j) == expected and [j[k] for k in range(40)] == expected
    assert j.bytes == sum(len(c) for c, _, _ in expected)
    with open(j.path, "rb") as f:
        assert f.read(MAGIC_SIZE) == b"HZRAFT\x01\x00"
    j.close()


def test_negative_indexes_and_out_of_range(tmp_path):
    expected = _entries(5)
    written = _journal(tmp_path, expected)
    for j in (written, _reopen(written)):  # from the entries held after adding, then from the file
        assert j[-1] == expected[-1] and j[-5] == expected[0] and j[-2][1] == 4
        with pytest.raises(IndexError):
            j[5]
        with pytest.raises(IndexError):
            j[-6]
    j.close()


def test_slices_are_views_that_pickle_as_lists(tmp_path):
    expected = _entries(30)
    j = _reopen(_journal(tmp_path, expected))
    assert j[10:20] == expected[10:20]
    assert list(j[10:]) == expected[10:] and len(j[10:]) == 20
    assert j[10:][2:5] == expected[12:15] and j[10:][-1] == expected[-1]
    assert j[::7] == expected[::7] and j[25:5] == [] and j[-3:] == expected[-3:]
    assert not isinstance(j[3:6], list)
    sent = pickle.loads(pickle.dumps({"entries": j[3:6]}, protocol=4))
    assert type(sent["entries"]) is list and sent["entries"] == expected[3:6]
    j.close()


def test_a_view_read_after_the_journal_was_cut_raises(tmp_path):
    j = _journal(tmp_path, _entries(10))
    tail = j[5:]
    j.add(_command(99), 11, 9)  # appends leave views valid
    assert len(list(tail)) == 5
    j.deleteEntriesFrom(7)
    with pytest.raises(StaleJournalViewError):
        list(tail)
    with pytest.raises(StaleJournalViewError):
        tail[0]
    j.close()


def test_a_slice_of_a_large_journal_reads_only_what_is_touched(tmp_path):
    size = 100_000
    expected_at = {10: _command(10, size + 3), 11: _command(11, size + 4)}
    j = _journal(tmp_path, _entries(520, size))  # ~52 MB
    j = _reopen(j)  # nothing held: every command comes from the file
    tracemalloc.start()
    try:
        tail = j[10:]  # what pysyncobj does for a follower far behind
        budget, total, taken = 4 * MiB, 0, 0
        for entry in tail:  # ... then it enumerates to a byte budget
            total += len(entry[0])
            taken += 1
            if total >= budget:
                break
        batch = tail[:taken]
        assert len(tail) == 510 and len(batch) == taken < 50
        assert tail[0][0] == expected_at[10] and batch[1][0] == expected_at[11]
        sent = pickle.dumps(batch, protocol=4)
        assert len(sent) < 2 * budget
        del sent
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * MiB  # the tail is 51 MB; the budget and one chunk are 5
    j.close()


def test_delete_from_and_to_then_reopen(tmp_path):
    expected = _entries(50)
    j = _journal(tmp_path, expected)
    j.deleteEntriesFrom(40)  # a follower's conflicting tail
    del expected[40:]
    j.add(b"new", 41, 9)
    expected.append((b"new", 41, 9))
    j.deleteEntriesTo(15)  # compaction after a snapshot
    expected = expected[15:]
    assert list(j) == expected and j[0] == expected[0] and j[-1] == expected[-1]
    assert j.bytes == sum(len(c) for c, _, _ in expected)
    assert os.path.getsize(j.path) == MAGIC_SIZE + j.bytes + len(expected) * ENTRY_OVERHEAD
    assert not os.path.exists(j.path + ".tmp")
    j = _reopen(j)
    assert list(j) == expected and j.bytes == sum(len(c) for c, _, _ in expected)
    j.deleteEntriesFrom(0)
    assert len(j) == 0 and j.bytes == 0
    j.add(b"again", 7, 3)
    j = _reopen(j)
    assert list(j) == [(b"again", 7, 3)]
    j.close()


def test_clear_then_reopen(tmp_path):
    j = _journal(tmp_path, _entries(20))
    j.clear()  # a snapshot was installed
    assert len(j) == 0 and j.bytes == 0 and list(j) == []
    j.add(b"snap-a", 100, 4)
    j.add(b"snap-b", 101, 4)
    j = _reopen(j)
    assert list(j) == [(b"snap-a", 100, 4), (b"snap-b", 101, 4)]
    assert os.path.getsize(j.path) == MAGIC_SIZE + 12 + 2 * ENTRY_OVERHEAD
    j.close()


@pytest.mark.parametrize("cut", [1, 9, ENTRY_OVERHEAD + 40])
def test_a_torn_last_entry_is_set_aside(tmp_path, cut):
    expected = _entries(10)
    j = _journal(tmp_path, expected)
    good = os.path.getsize(j.path)
    j.add(_command(77, 200), 11, 5)
    j.close()
    with open(j.path, "rb") as f:
        whole = f.read()
    with open(j.path, "wb") as f:
        f.write(whole[:-cut])  # the last write was cut short
    j = DiskJournal(j.path)
    assert list(j) == expected and j.torn_tail == (good, len(whole) - cut - good)
    assert os.path.getsize(j.path) == good
    with open(f"{j.path}.torn-{good}", "rb") as f:
        assert f.read() == whole[good:-cut]
    j.add(b"after", 11, 5)
    j = _reopen(j)
    assert list(j) == [*expected, (b"after", 11, 5)] and j.torn_tail is None
    j.close()


def test_a_half_written_last_entry_is_set_aside(tmp_path):
    expected = _entries(10)
    j = _journal(tmp_path, [*expected, (b"z" * 3000, 11, 5)])
    at = j._offsets[-1]
    j.close()
    with open(j.path, "r+b") as f:
        f.seek((at // SECTOR + 2) * SECTOR)
        f.write(b"\0" * SECTOR)  # its lengths are whole, a sector inside it never reached the disk
    j = DiskJournal(j.path)
    assert list(j) == expected and j.torn_tail is not None
    j.close()


@pytest.mark.parametrize("where", [0.5, 0.99], ids=["its middle", "its last sector"])
def test_a_flipped_bit_in_the_whole_last_entry_is_refused_not_cut(tmp_path, where):
    """Bit rot in the last entry, which a follower synced and acknowledged before the
    one-second timer stored a commit index past it: its lengths agree and no sector of it
    reads back empty, as no torn write leaves a frame (a write lost at a power cut leaves
    whole sectors empty). Cut as a torn tail, it dropped an acknowledged entry."""
    expected = _entries(10)
    j = _journal(tmp_path, [*expected, (_command(11, 3000), 11, 5)])
    at, end = j._offsets[-1], os.path.getsize(j.path)
    j.close()
    flip = at + int((end - at) * where) - 8
    with open(j.path, "r+b") as f:
        f.seek(flip)
        byte = f.read(1)[0]
        f.seek(flip)
        f.write(bytes([byte ^ 0x10]))
    with pytest.raises(CorruptLogError, match="damaged, not torn") as caught:
        DiskJournal(j.path)
    assert caught.value.offset == at
    assert not os.path.exists(f"{j.path}.torn-{at}")


@pytest.mark.parametrize("kept", [0, 10], ids=["zeros only", "a frame's head, then zeros"])
def test_zeros_after_the_last_entry_are_a_torn_tail(tmp_path, kept):
    expected = _entries(10)
    j = _journal(tmp_path, expected)
    good = os.path.getsize(j.path)
    j.close()
    tail = frame(ENTRY_HEAD.pack(11, 2) + b"c" * 200)[:kept] + b"\0" * 5000
    with open(j.path, "ab") as f:
        f.write(tail)  # a crash after the file's size grew, before its data was written
    j = DiskJournal(j.path)
    assert list(j) == expected and j.torn_tail == (good, len(tail))
    j.close()


def _lose_sector_of_entry(tmp_path, k: int, commit: int) -> tuple[DiskJournal, int]:
    """Entries 1..20, the commit index ``commit`` stored; then a power cut kept later
    sectors of the journal and not the one where entry ``k`` begins (zeros from there)."""
    j = _journal(tmp_path, _entries(20))
    j.setRaftCommitIndex(commit)
    j.onOneSecondTimer()  # syncs, then stores the commit index
    at = j._offsets[k - 1]
    j.close()
    with open(j.path, "r+b") as f:
        f.seek(at)
        f.write(bytes(SECTOR - at % SECTOR))
    assert at // SECTOR + 1 < os.path.getsize(j.path) // SECTOR  # whole entries past it
    return j, at


def test_a_write_lost_out_of_order_past_the_stored_commit_index_is_torn(tmp_path):
    """Entries added but not yet synced, and a power cut that kept a later sector and not
    an earlier one (the disk and the kernel write pages back in no order). The entries
    past the lost write were not synced either, or it would be on disk: all are cut, as
    a torn tail is (the sim's seed 1303 with --service --power-loss --membership
    --out-of-order was refused a restart)."""
    j, at = _lose_sector_of_entry(tmp_path, 15, commit=10)
    j = DiskJournal(j.path)
    assert list(j) == _entries(14) and j.torn_tail is not None and j.torn_tail[0] == at
    j.close()


def test_a_write_lost_out_of_order_at_or_below_the_stored_commit_index_is_refused(tmp_path):
    j, at = _lose_sector_of_entry(tmp_path, 8, commit=10)
    with pytest.raises(CorruptLogError, match="not a torn tail"):
        DiskJournal(j.path)
    assert not os.path.exists(f"{j.path}.torn-{at}")


def _damage(path: str, at: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(b"#")


def test_corruption_in_the_middle_is_refused(tmp_path):
    j = _journal(tmp_path, _entries(10))
    at = j._offsets[4]
    j.close()
    _damage(j.path, at + 40)
    with pytest.raises(CorruptLogError) as caught:
        DiskJournal(j.path)
    assert caught.value.offset == at


def test_corruption_after_open_is_refused_when_read(tmp_path):
    j = _reopen(_journal(tmp_path, _entries(10)))
    _damage(j.path, j._offsets[4] + 40)
    assert j[3] == _entries(10)[3]
    with pytest.raises(CorruptLogError):
        j[4]
    with pytest.raises(CorruptLogError):
        list(j[2:6])
    j.close()


def _record_fsyncs(monkeypatch) -> list[int]:
    """From now on, the size of each file fsynced, in order."""
    sizes: list[int] = []
    real_fsync = os.fsync

    def fsync(fd):
        sizes.append(os.fstat(fd).st_size)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return sizes


def test_a_cut_is_fsynced_before_anything_is_appended_in_its_place(tmp_path, monkeypatch):
    """A follower cuts its conflicting tail (ftruncate) and appends the leader's entries.
    Unsynced, a crash may keep the old length with the new bytes written over part of the
    old ones: a bad frame followed by old non-zero bytes, which open refuses
    (CorruptLogError, a node that does not start). The cut is durable before the append."""
    j = _journal(tmp_path, _entries(10))
    assert j.sync()
    fsynced_sizes = _record_fsyncs(monkeypatch)
    cut_at = j._offsets[6]
    j.deleteEntriesFrom(6)
    assert fsynced_sizes == [cut_at]
    j.add(b"the leader's entry 7", 7, 9)
    assert fsynced_sizes == [cut_at]  # the append waits for the next sync, as always
    monkeypatch.undo()
    j.close()


def test_a_torn_tail_cut_on_open_is_fsynced_before_anything_is_appended_in_its_place(tmp_path, monkeypatch):
    """As a cut: the torn tail's bytes must not come back under the entries appended in
    its place, a bad frame followed by old non-zero bytes that open refuses."""
    expected = _entries(10)
    j = _journal(tmp_path, [*expected, (_command(11, 2000), 11, 5)])
    good = j._offsets[-1]
    j.close()
    with open(j.path, "r+b") as f:
        f.truncate(good + 1000)  # the last write cut short
    fsynced_sizes = _record_fsyncs(monkeypatch)
    j = DiskJournal(j.path)
    assert j.torn_tail is not None and fsynced_sizes == [good]
    assert not j.sync()  # what was read back is on disk: nothing left to sync
    monkeypatch.undo()
    j.close()


def test_a_failed_fsync_ends_the_process_and_a_retry_does_not_report_success(tmp_path, monkeypatch, caplog):
    """fsyncgate: the journal kept its dirty flag after a failed fsync and fsynced again at
    the next sync, which Linux may answer with success after dropping the pages: the node
    would then ack or apply entries that are not on disk. pysyncobj's tick thread catches
    an exception, logs it and runs the tick again, so raising is not enough: the process
    must end (status 74, a CRITICAL line naming the file and errno), and a sync after
    that must not report success."""
    exits: list[int] = []
    monkeypatch.setattr(os, "_exit", exits.append)  # in a node, the process ends here
    monkeypatch.setattr(durable, "_failed", None)
    j = _journal(tmp_path, _entries(3))
    assert j.sync()
    j.add(b"not acked yet", 4, 1)
    real_fsync, failed = os.fsync, []

    def fsync(fd):
        if not failed:
            failed.append(fd)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with caplog.at_level(logging.CRITICAL), pytest.raises(FsyncFailedError):
        j.sync()
    assert exits == [durable.FSYNC_FAILED_EXIT]
    assert j.path in caplog.records[-1].getMessage() and "errno 5" in caplog.records[-1].getMessage()
    with pytest.raises(FsyncFailedError):
        j.sync()  # fsync works now: that proves nothing about the pages the first one lost
    assert exits == [durable.FSYNC_FAILED_EXIT] * 2


@pytest.mark.parametrize(
    "name, content",
    [("journal", b"HZJRNL\x01\x00"), ("journal", b"HZRA"), ("journal.meta", b"\x80\x04garbage")],
    ids=["another kind", "a cut magic", "an unreadable meta, which holds the vote"],
)
def test_a_file_that_is_not_what_its_name_says_is_refused(tmp_path, name, content):
    with open(tmp_path / name, "wb") as f:
        f.write(content)
    with pytest.raises(CorruptLogError):
        DiskJournal(str(tmp_path / "journal"))


def test_term_vote_and_commit_index_survive_reopen(tmp_path):
    j = _journal(tmp_path, _entries(3))
    assert (j.getCurrentTerm(), j.getVotedForNodeId(), j.getRaftCommitIndex()) == (0, None, 1)
    j.setCurrentTerm(5, "127.0.0.1:7082")
    on_disk = MetaStorer(j.meta_path).getMeta()  # at once, before any vote is sent; pysyncobj's format
    assert on_disk == {"currentTerm": 5, "votedForNodeId": "127.0.0.1:7082"}
    j.setRaftCommitIndex(3)
    j.onOneSecondTimer()
    j.setRaftCommitIndex(9)  # not stored until the next timer
    j = _reopen(j)
    assert (j.getCurrentTerm(), j.getVotedForNodeId(), j.getRaftCommitIndex()) == (5, "127.0.0.1:7082", 3)
    assert not os.path.exists(j.meta_path + ".tmp")
    j.close()


def test_a_pysyncobj_journal_is_converted_with_its_term_and_vote(tmp_path):
    path = str(tmp_path / "journal")
    old = FileJournal(path)
    expected = _entries(30, size=5_000)
    for e in expected:
        old.add(*e)
    old.setCurrentTerm(7, "127.0.0.1:7083")
    old.setRaftCommitIndex(25)
    old.onOneSecondTimer()
    old._destroy()
    j = DiskJournal(path)
    assert list(j) == expected and j.bytes == sum(len(c) for c, _, _ in expected)
    assert (j.getCurrentTerm(), j.getVotedForNodeId(), j.getRaftCommitIndex()) == (7, "127.0.0.1:7083", 25)
    j = _reopen(j)
    assert list(j) == expected
    with open(path, "rb") as f:
        assert f.read(6) == b"HZRAFT"
    j.close()


def test_memory_stays_flat_while_50_mb_of_commands_are_added(tmp_path):
    tracemalloc.start()
    try:
        j = _journal(tmp_path)
        for k in range(5_000):
            j.add(os.urandom(10_000), k + 1, 1)  # 50 MB
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert j.bytes == 50_000_000 and j[2_500][1] == 2_501
    # the latest entries held (2 MiB) and 24 bytes an entry; pysyncobj's list held all 50 MB
    assert current < 3 * MiB and peak < 4 * MiB, (current, peak)
    j.close()


def test_an_entry_costs_a_few_integers(tmp_path):
    count = 100_000
    j = _journal(tmp_path, recent_bytes=0)
    for k in range(count):
        j.add(b"%0100d" % k, k + 1, 1)
    j.close()
    tracemalloc.start()
    try:
        j = DiskJournal(j.path)
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(j) == count and j[-1] == (b"%0100d" % (count - 1), count, 1)
    assert current / count < 40, current / count  # a list of (bytes, idx, term) is ~230
    j.close()


# -- in a node ---------------------------------------------------------------------------


def _single_node(tmp_path, port: int) -> RaftNode:
    store = Storage(str(tmp_path / "store"))
    settings = ClusterSettings("n0", f"127.0.0.1:{port}", str(tmp_path), (), insecure_dev=True)
    crossing = LoopCrossing(asyncio.get_running_loop())
    return RaftNode(settings, StateMachine(store), crossing, lambda _a: None, lambda _r: None)


async def _propose_as_leader(node: RaftNode, ms: int) -> None:
    deadline = time.monotonic() + 15
    while not node.is_master():
        assert time.monotonic() < deadline, "no leader"
        await asyncio.sleep(0.05)
    await node.propose(Entry(SYNC, Watermark(ms), ms).encode(), timeout=5)


async def _stop(node: RaftNode) -> None:
    await asyncio.to_thread(node.destroy_synchronous)
    node.state.store.close()


def test_a_node_keeps_its_raft_log_in_the_disk_journal_across_a_restart(tmp_path):
    original = pysyncobj.syncobj.createJournal
    (port,) = free_ports(1)
    path = str(tmp_path / "raft" / "journal")

    async def run() -> None:
        node = _single_node(tmp_path, port)
        try:
            assert pysyncobj.syncobj.createJournal is original  # patched only while it starts
            assert isinstance(node._journal, DiskJournal) and node.raft_log is node._journal
            for ms in (1_000, 2_000, 3_000):
                await _propose_as_leader(node, ms)
        finally:
            await _stop(node)
        first = list(DiskJournal(path))
        assert sum(1 for command, _, _ in first if len(command) > 1) == 3  # and pysyncobj's no-ops
        node = _single_node(tmp_path, port)  # restarted: the log is read back from the file
        try:
            await _propose_as_leader(node, 4_000)
            assert node.state.ws == Watermark(4_000)
        finally:
            await _stop(node)
        after = list(DiskJournal(path))
        assert after[: len(first)] == first and after[-1][1] > first[-1][1]

    asyncio.run(run())


def test_term_at_answers_from_memory_for_held_indexes_only(tmp_path):
    j = _journal(tmp_path, _entries(30, first_idx=5))  # indexes 5..34, terms 1..3
    assert j.term_at(5) == 1 and j.term_at(25) == 3 and j.last_idx == 34
    assert j.term_at(4) is None and j.term_at(35) is None
    j.deleteEntriesTo(10)  # compaction: 15..34 left
    assert j.term_at(14) is None and j.term_at(15) == 2
    j.close()


def _length_past_the_end(tmp_path, entry: int) -> tuple[str, int]:
    """Ten entries synced, the commit index 8 stored, then the length field of entry
    ``entry`` (1-based) made to claim more than the file holds: the journal's path, and
    the damaged frame's offset."""
    j = _journal(tmp_path, _entries(10))
    at = j._offsets[entry - 1]
    j.setRaftCommitIndex(8)
    j.onOneSecondTimer()  # syncs, then stores the commit index
    j.close()
    with open(j.path, "r+b") as f:
        f.seek(at)
        f.write(FRAME_HEAD.pack(1 << 30))
    return j.path, at


@pytest.mark.parametrize("entry", [5, 9])
def test_a_length_past_the_end_with_whole_frames_after_it_is_refused_not_cut(tmp_path, entry):
    """A length field that claims more than the file holds looks like a torn tail. Below
    the stored commit index (stored only after a sync) it names synced entries: cut there,
    the journal dropped entries 5..10, acknowledged ones. Above it (stored at most once a
    second) entries may be synced and acknowledged too, and a length past the end with
    whole frames after it is no write a power loss leaves (a lost one reads as zeros):
    cut there, it dropped entries 9 and 10."""
    path, at = _length_past_the_end(tmp_path, entry)
    with pytest.raises(CorruptLogError, match="not a torn tail") as caught:
        DiskJournal(path)
    assert caught.value.offset == at
    assert not os.path.exists(f"{path}.torn-{at}")


def test_a_torn_tail_past_the_stored_commit_index_is_still_set_aside(tmp_path):
    path, _at = _length_past_the_end(tmp_path, 10)  # the last frame: nothing whole after it
    j = DiskJournal(path)
    assert j.last_idx == 9 and j.torn_tail is not None
    j.close()


def _tear_first_frame_after_clear(tmp_path, committed: int) -> str:
    """A follower installs a snapshot at index 649: the journal is cleared and pysyncobj adds
    the dump's last two entries, unsynced; a power loss tears the first of them."""
    j = _journal(tmp_path, _entries(600))
    j.setRaftCommitIndex(committed)
    j.onOneSecondTimer()  # syncs, then stores the commit index
    j.clear()
    j.add(_command(648, 300), 648, 7)
    j.add(_command(649, 300), 649, 7)
    j.close()
    with open(j.path, "r+b") as f:
        f.truncate(MAGIC_SIZE + 140)  # the first frame's first 140 bytes reached the disk
    return j.path


@pytest.mark.parametrize("committed", [600, 649])
def test_a_torn_first_entry_after_a_snapshot_install_is_set_aside(tmp_path, committed):
    """The stored commit index names entries the dump holds (up to 649), not the journal:
    a torn frame there is an unsynced append, so the node starts (the sim's seed 8 with
    --service --power-loss --membership --spares-first was refused a restart)."""
    path = _tear_first_frame_after_clear(tmp_path, committed)
    j = DiskJournal(path, held_to=649)
    assert len(j) == 0 and j.torn_tail == (MAGIC_SIZE, 140)
    j.close()


def test_a_torn_first_entry_is_damage_when_the_dump_ends_below_the_commit_index(tmp_path):
    path = _tear_first_frame_after_clear(tmp_path, committed=649)
    with pytest.raises(CorruptLogError, match="not a torn tail"):
        DiskJournal(path, held_to=648)
    assert not os.path.exists(f"{path}.torn-{MAGIC_SIZE}")


def test_entries_a_crashed_process_left_unsynced_are_synced_before_they_are_reported(tmp_path, monkeypatch):
    """A process that died between writing entries and syncing them (SIGKILL, or a crash
    in the write) leaves them in the page cache: the restarted node reads them back, and a
    power loss may still take them. Before the node counts them as its own towards a commit
    or tells a leader it holds them, its first sync makes them durable."""
    j = _journal(tmp_path, _entries(10))
    j._file.close()  # the process dies: nothing synced, the page cache keeps the bytes
    j._file = None
    fsynced = _record_fsyncs(monkeypatch)
    again = DiskJournal(j.path)
    assert len(again) == 10
    assert again.sync(), "the entries read back were taken as durable"
    assert fsynced == [os.path.getsize(j.path)]
    assert not again.sync()  # once only
    monkeypatch.undo()
    again.close()
