"""Cut files at random offsets and flip random bytes: recovery or a clear error, never wrong data."""

from __future__ import annotations

import os
import random
import shutil

import msgpack
import pytest

from horologe.storage import ReadyEntry, Storage, StorageConfig, StorageError, check_store
from horologe.storage.framing import frame

from .helpers import H0, msg


def build(root: str) -> dict:
    """A store with several hours, cancels, keys and a ready log; returns id -> body."""
    written = {}
    with Storage(root, StorageConfig(fsync=False)) as s:
        for ri in range(1, 13):
            batch = [
                msg(
                    H0 + (ri % 3) * 3_600_000 + (i % 5) * 1000 + i,
                    body=f"{ri}:{i}".encode() * 3,
                    key=f"k{ri}-{i}" if i % 4 == 0 else None,
                    tags=("a", "b")[: i % 3],
                )
                for i in range(15)
            ]
            ids = s.apply(ri, lambda tx, batch=batch: tx.append(batch))
            written.update({mid: m.body for mid, m in zip(ids, batch, strict=False)})
        first = sorted(written)[0]
        s.apply(13, lambda tx: tx.cancel(first))
        s.apply(14, lambda tx: tx.append_ready("orders", [ReadyEntry(first.hour, 1, 0, H0, H0 + 3)]))
    return written


def data_files(root: str) -> list[str]:
    out = []
    for d, _, names in os.walk(root):
        for n in names:
            out.append(os.path.relpath(os.path.join(d, n), root))
    return sorted(out)


def first_log(root: str) -> str:
    names = sorted(n for n in os.listdir(os.path.join(root, "delay")) if n.endswith(".log"))
    return os.path.join(root, "delay", names[0])


def verify_never_wrong(root: str, written: dict) -> str:
    """Reopen; the outcome is a clear StorageError or a store whose every message is right."""
    try:
        with Storage(root, StorageConfig(fsync=False)) as s:
            check_store(s)
            for mid, body in written.items():
                bucket = s.bucket(mid.hour)
                if mid.global_index < bucket.count:  # a lost tail batch is gone, not wrong
                    assert s.read_message(mid).message.body == body
            return "recovered"
    except StorageError as e:
        assert str(e)  # the error says what and where
        return "refused"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("pristine") / "store")
    return root, build(root)


@pytest.mark.parametrize("seed", range(60))
def test_cut_file_at_random_offset(pristine, tmp_path, seed):
    src, written = pristine
    root = str(tmp_path / "store")
    shutil.copytree(src, root)
    rng = random.Random(seed)
    rel = rng.choice(data_files(root))
    path = os.path.join(root, rel)
    cut = rng.randrange(0, os.path.getsize(path) + 1)
    os.truncate(path, cut)
    verify_never_wrong(root, written)


@pytest.mark.parametrize("seed", range(60))
def test_flip_random_byte(pristine, tmp_path, seed):
    src, written = pristine
    root = str(tmp_path / "store")
    shutil.copytree(src, root)
    rng = random.Random(1000 + seed)
    rel = rng.choice(data_files(root))
    path = os.path.join(root, rel)
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        at = rng.randrange(len(data))
        data[at] ^= 1 << rng.randrange(8)
        f.seek(0)
        f.write(data)
    outcome = verify_never_wrong(root, written)
    if not rel.endswith(".heads"):
        # Every committed byte is covered by a checksum: a flip there cannot pass as data.
        assert outcome == "refused" or rel == "commits.log", (rel, at)


def test_torn_tail_is_set_aside_and_cut(tmp_path):
    root = str(tmp_path / "store")
    written = build(root)
    log = first_log(root)
    size = os.path.getsize(log)
    with open(log, "ab") as f:
        f.write(b"\x40\x00\x00\x00half a record")  # a write cut short by a crash
    with Storage(root) as s:
        assert os.path.getsize(log) == size
        assert any("set aside 17 uncommitted bytes" in r for r in s.recovered)
        assert os.listdir(os.path.join(root, "torn"))
        check_store(s)
    assert verify_never_wrong(root, written) == "recovered"


@pytest.mark.parametrize(
    "tail",
    [bytes(12), bytes(100), b"\x40\x00\x00\x00half a record" + bytes(60)],
    ids=["one-empty-frame", "zeros", "half-a-frame-then-zeros"],
)
def test_a_journal_tail_of_zeros_is_torn_not_corrupt(tmp_path, tail):
    """A power loss can leave an appended tail as zeros (the size reached the disk, the
    data did not: XFS, ext4 without data=ordered). Twelve zeros read as a whole frame with
    an empty payload and crc32(b"") == 0, so the scan must not take them for a commit."""
    root = str(tmp_path / "store")
    build(root)
    journal = os.path.join(root, "commits.log")
    size = os.path.getsize(journal)
    with open(journal, "ab") as f:
        f.write(tail)
    with Storage(root) as s:
        assert s.applied_index == 14
        assert os.path.getsize(journal) == size
        check_store(s)


def test_zeros_followed_by_a_sync_point_and_a_frame_are_corruption(tmp_path):
    """Zeros in the middle, then a sync point with a frame after it: that frame was written
    once the sync point's fsync returned, so the zeros were on disk. Not what a crash leaves."""
    root = str(tmp_path / "store")
    build(root)
    journal = os.path.join(root, "commits.log")
    with open(journal, "ab") as f:
        f.write(bytes(24) + frame(msgpack.packb({"ri": 14})) + frame(msgpack.packb({"ri": 14, "u": True})))
    with pytest.raises(StorageError):
        Storage(root).close()


def test_zeros_followed_by_unsynced_frames_are_writes_lost_out_of_order(tmp_path):
    """Past the last sync point a power cut keeps pages in no order: zeros, then frames
    that were not synced either. Open goes back to the sync point."""
    root = str(tmp_path / "store")
    written = build(root)
    journal = os.path.join(root, "commits.log")
    size = os.path.getsize(journal)
    with open(journal, "ab") as f:
        f.write(bytes(24) + frame(msgpack.packb({"ri": 15, "u": True})) + frame(msgpack.packb({"ri": 16})))
    with Storage(root) as s:
        assert s.applied_index == 14 and os.path.getsize(journal) == size
        assert any(f"writes lost at {size}" in line for line in s.recovered), s.recovered
        check_store(s)
    assert verify_never_wrong(root, written) == "recovered"


def test_uncommitted_batch_is_rolled_back_on_open(tmp_path):
    """Data written but never named by the journal (crash before commit) is set aside."""
    root = str(tmp_path / "store")
    build(root)
    journal = os.path.join(root, "commits.log")
    with open(journal, "rb") as f:
        before = f.read()
    with Storage(root, StorageConfig(fsync=False)) as s:
        s.apply(15, lambda tx: tx.append([msg(H0 + 5 * 3_600_000)]))  # creates a new hour
    with open(journal, "wb") as f:  # as if the crash came before the journal frame
        f.write(before)
    with Storage(root) as s:
        assert s.applied_index == 14
        assert H0 // 3_600_000 + 5 not in s.hours()
        assert len(s.recovered) >= 2
        check_store(s)
        ids = s.apply(15, lambda tx: tx.append([msg(H0 + 5 * 3_600_000, body=b"again")]))
        assert s.read_message(ids[0]).message.body == b"again"


def test_corruption_in_the_middle_names_file_and_offset(tmp_path):
    root = str(tmp_path / "store")
    build(root)
    log = first_log(root)
    with open(log, "r+b") as f:
        f.seek(40)
        b = f.read(1)
        f.seek(40)
        f.write(bytes([b[0] ^ 0xFF]))
    with Storage(root) as s, pytest.raises(StorageError) as e:
        check_store(s)
    assert e.value.path == log and e.value.offset <= 40


def test_a_record_that_is_not_the_one_its_index_entry_names_is_corruption(tmp_path):
    """A whole, checksummed record in another's place (say, a write that landed twice)."""
    root = str(tmp_path / "store")
    with Storage(root, StorageConfig(fsync=True)) as s:
        ids = s.apply(1, lambda tx: tx.append([msg(H0 + 1000, body=b"a"), msg(H0 + 2000, body=b"b")]))
        bucket = s.bucket(ids[0].hour)
        first, second = (bucket.entry(mid.global_index) for mid in ids)
    assert first["size"] == second["size"]
    with open(first_log(root), "r+b") as f:
        f.seek(int(first["offset"]))
        record = f.read(int(first["size"]))
        f.seek(int(second["offset"]))
        f.write(record)
    with Storage(root) as s:
        for read in (lambda: s.read_message(ids[1]), lambda: s.read_messages(ids)):
            with pytest.raises(StorageError) as e:
                read()
            assert f"index says {ids[1]}" in str(e.value)
