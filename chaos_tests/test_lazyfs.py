"""LazyFS on real FUSE mounts: only what was fsynced survives a simulated power loss."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from .lazyfs import BLOCK, LazyFS, Overlay, is_mounted

needs_fuse = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs /dev/fuse and fusermount3 (Debian: fuse3)",
)

OFFSETS = st.integers(0, 3 * BLOCK + 100)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), OFFSETS, st.binary(min_size=1, max_size=BLOCK + 50)),
        st.tuples(st.just("truncate"), OFFSETS),
        st.tuples(st.just("fsync")),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(initial=st.binary(max_size=2 * BLOCK + 10), ops=OPS)
# Cut, then grown past the cut by a write further on: the bytes in between must come back as zeros.
@example(initial=b"A" * (2 * BLOCK), ops=[("truncate", 10), ("write", BLOCK + 5, b"B"), ("fsync",)])
def test_overlay_reads_like_a_file_and_fsync_makes_exactly_that_durable(tmp_path_factory, initial, ops):
    """The overlay against a bytearray: what a reader sees, and what the backing file holds."""
    path = tmp_path_factory.mktemp("overlay") / "f"
    path.write_bytes(initial)
    fd = os.open(path, os.O_RDWR)
    try:
        seen, durable = bytearray(initial), bytes(initial)
        overlay = Overlay(fd)
        for op in ops:
            if op[0] == "write":
                _, off, data = op
                seen[len(seen) : off] = bytes(max(0, off - len(seen)))
                seen[off : off + len(data)] = data
                overlay.write(off, data)
            elif op[0] == "truncate":
                seen = seen[: op[1]] + bytes(max(0, op[1] - len(seen)))
                overlay.truncate(op[1])
            else:
                overlay.apply()
                overlay, durable = Overlay(fd), bytes(seen)
            assert overlay.size == len(seen)
            assert overlay.read(0, len(seen) + 10) == seen
            assert overlay.read(BLOCK - 3, 7) == seen[BLOCK - 3 : BLOCK + 4]
            assert path.read_bytes() == durable
    finally:
        os.close(fd)


@pytest.fixture
def backing(tmp_path):
    path = tmp_path / "backing"
    path.mkdir()
    return path


@pytest.fixture
def fs(tmp_path, backing):
    with LazyFS(backing, tmp_path / "mnt", log_path=tmp_path / "lazyfs.log") as fs:
        yield fs


def mnt(fs: LazyFS, name: str) -> str:
    return os.path.join(fs.mountpoint, name)


def write(path: str, data: bytes, *, fsync: bool, mode: str = "wb") -> None:
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def child(fs: LazyFS, code: str) -> subprocess.Popen:
    """A process working in the mount; returns once it printed 'ready' (and keeps running)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(code) + "\nprint('ready', flush=True)\nimport time\ntime.sleep(60)",
        ],
        cwd=fs.mountpoint,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line == "ready\n", f"child failed: {line!r}"
    return proc


def sigkill(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()
    proc.stdout.close()


@needs_fuse
def test_fsynced_write_survives_power_loss_and_a_fresh_mount_reads_it(fs, backing, tmp_path):
    write(mnt(fs, "a"), b"durable", fsync=True)
    fs.lose_power()
    assert not is_mounted(fs.mountpoint)
    assert (backing / "a").read_bytes() == b"durable"
    with LazyFS(backing, fs.mountpoint, log_path=tmp_path / "again.log") as again:
        assert read(mnt(again, "a")) == b"durable"


@needs_fuse
def test_out_of_order_a_power_loss_keeps_some_unsynced_sectors_each_whole(backing, tmp_path):
    """Each unsynced sector on the disk whole or not at all, in no order: a later one kept
    where an earlier one is not (zeros); the synced bytes stay."""
    written = bytes(range(1, 256)) * 40  # 10,200 bytes, no zero byte
    now = b"synced" + written
    with LazyFS(backing, tmp_path / "mnt", log_path=tmp_path / "lazyfs.log", out_of_order=3) as fs:
        for k in range(4):
            write(mnt(fs, f"f{k}"), b"synced", fsync=True)
            with open(mnt(fs, f"f{k}"), "ab") as f:
                f.write(written)
        fs.lose_power()
    gaps = 0
    for k in range(4):
        kept = (backing / f"f{k}").read_bytes()
        assert kept.startswith(b"synced") and len(kept) <= len(now)
        lost = []
        for lo in range(0, len(kept), 512):
            start = max(lo, 6)  # the synced bytes stay
            part = kept[start : lo + 512]
            assert part == now[start : start + len(part)] or not part.strip(b"\0"), (k, lo)
            if not part.strip(b"\0"):
                lost.append(lo)
        gaps += bool(lost) and min(lost) < len(kept) - 512  # a whole sector lost before the kept end
    assert gaps


@needs_fuse
def test_write_without_fsync_by_a_killed_process_is_lost_but_creation_is_not(fs, backing):
    write(mnt(fs, "old"), b"synced;", fsync=True)
    proc = child(
        fs,
        """
        old = open("old", "ab"); old.write(b"appended"); old.flush()
        new = open("new", "wb"); new.write(b"never synced"); new.flush()
        """,
    )
    assert read(mnt(fs, "old")) == b"synced;appended"
    sigkill(proc)
    fs.lose_power()
    assert (backing / "old").read_bytes() == b"synced;"
    assert (backing / "new").read_bytes() == b""  # created (durable at once), contents gone


@needs_fuse
def test_close_does_not_make_data_durable(fs, backing):
    write(mnt(fs, "a"), b"closed, not synced", fsync=False)
    fs.lose_power()
    assert (backing / "a").read_bytes() == b""


@needs_fuse
def test_reads_see_unsynced_writes_and_truncates_until_power_loss(fs, backing):
    write(mnt(fs, "a"), b"0123456789" * 1000, fsync=True)
    write(mnt(fs, "a"), b"abc", fsync=False, mode="r+b")
    write(mnt(fs, "b"), b"x" * 5000, fsync=False)
    os.truncate(mnt(fs, "a"), 5)  # a size change is held too
    assert read(mnt(fs, "a")) == b"abc34"
    assert os.stat(mnt(fs, "a")).st_size == 5
    assert read(mnt(fs, "b")) == b"x" * 5000
    assert (backing / "a").read_bytes() == b"0123456789" * 1000  # all of it still in memory
    fs.lose_power()
    assert (backing / "a").read_bytes() == b"0123456789" * 1000
    assert (backing / "b").read_bytes() == b""


# pysyncobj's FileJournal (the Raft log until issue #12, still read once to convert an old
# data dir): mmap(fd, 0) MAP_SHARED, resize (ftruncate + mremap), msync via flush().
MMAP_JOURNAL = """
import mmap, os
with open("journal", "wb") as f:
    f.write(b"H" * 100)
    f.flush()
    os.fsync(f.fileno())
f = open("journal", "r+b")
mm = mmap.mmap(f.fileno(), 0)
mm.resize(1024)
mm[100:105] = b"first"
mm.resize(20000)
mm[15000:15006] = b"second"
"""


@needs_fuse
def test_mmap_write_resize_and_msync_survive_power_loss(fs, backing):
    proc = child(fs, MMAP_JOURNAL + "mm.flush()\n")
    sigkill(proc)
    fs.lose_power()
    data = (backing / "journal").read_bytes()
    assert len(data) == 20000
    assert data[:100] == b"H" * 100
    assert data[100:105] == b"first"
    assert data[15000:15006] == b"second"
    assert data.count(0) == 20000 - 111


@needs_fuse
def test_mmap_write_without_msync_is_lost(fs, backing):
    proc = child(fs, MMAP_JOURNAL)
    sigkill(proc)  # the kernel writes the dirty pages to the daemon as the process dies
    fs.lose_power()
    assert (backing / "journal").read_bytes() == b"H" * 100


@needs_fuse
def test_replace_of_a_fsynced_temp_file_survives_and_of_an_unsynced_one_leaves_it_empty(fs, backing):
    write(mnt(fs, "meta"), b"v1", fsync=True)
    write(mnt(fs, "meta.tmp"), b"v2", fsync=True)
    os.replace(mnt(fs, "meta.tmp"), mnt(fs, "meta"))
    write(mnt(fs, "other"), b"v1", fsync=True)
    write(mnt(fs, "other.tmp"), b"v2", fsync=False)
    os.replace(mnt(fs, "other.tmp"), mnt(fs, "other"))
    dir_fd = os.open(fs.mountpoint, os.O_RDONLY | os.O_DIRECTORY)  # storage's fsync_dir
    os.fsync(dir_fd)
    os.close(dir_fd)
    assert read(mnt(fs, "other")) == b"v2"
    fs.lose_power()
    assert sorted(os.listdir(backing)) == ["meta", "other"]
    assert (backing / "meta").read_bytes() == b"v2"
    assert (backing / "other").read_bytes() == b""  # the rename is durable, the data never was


@needs_fuse
def test_hard_link_shares_data_and_keeps_what_was_fsynced(fs, backing):
    os.mkdir(mnt(fs, "snap"))
    write(mnt(fs, "log"), b"synced;", fsync=True)
    os.link(mnt(fs, "log"), mnt(fs, "snap/log"))
    write(mnt(fs, "log"), b"more", fsync=False, mode="ab")
    assert read(mnt(fs, "snap/log")) == b"synced;more"  # one inode, one overlay
    assert os.stat(mnt(fs, "snap/log")).st_nlink == 2
    fs.lose_power()
    assert (backing / "log").read_bytes() == b"synced;"
    assert (backing / "snap" / "log").read_bytes() == b"synced;"
    assert os.stat(backing / "log").st_ino == os.stat(backing / "snap" / "log").st_ino


@needs_fuse
def test_directory_rename_keeps_files_reachable(fs, backing):
    os.makedirs(mnt(fs, "tmp/sub"))
    write(mnt(fs, "tmp/sub/f"), b"data", fsync=True)
    fd = os.open(mnt(fs, "tmp/sub/f"), os.O_RDWR)
    os.rename(mnt(fs, "tmp"), mnt(fs, "final"))
    os.pwrite(fd, b"DA", 0)
    os.fsync(fd)
    os.close(fd)
    assert read(mnt(fs, "final/sub/f")) == b"DAta"
    fs.lose_power()
    assert (backing / "final" / "sub" / "f").read_bytes() == b"DAta"


@needs_fuse
def test_power_loss_with_the_mount_still_in_use_cuts_it_off(fs, backing):
    proc = child(fs, 'f = open("busy", "wb"); f.write(b"in flight"); f.flush()')
    try:
        fs.lose_power()  # the precondition (kill the users first) broken: it must still end
        assert not is_mounted(fs.mountpoint)
        assert (backing / "busy").read_bytes() == b""
    finally:
        sigkill(proc)


@needs_fuse
def test_stop_drops_unsynced_data_and_a_dead_daemon_leaves_no_mount(fs, backing):
    write(mnt(fs, "a"), b"unsynced", fsync=False)
    fs.stop()
    assert (backing / "a").read_bytes() == b""
    fs.start()
    fs.proc.kill()  # a crashed daemon: the mount is dead until someone unmounts it
    fs.proc.wait()
    with pytest.raises(RuntimeError, match="exited with"):
        fs.stop()
    assert not is_mounted(fs.mountpoint)
    assert os.listdir(fs.mountpoint) == []


@needs_fuse
def test_an_armed_cut_keeps_the_rename_and_loses_everything_after_it(backing, tmp_path):
    with LazyFS(backing, tmp_path / "mnt", log_path=tmp_path / "lazyfs.log", cut_on_rename_to="snap") as fs:
        write(mnt(fs, "snap.tmp"), b"one", fsync=True)
        os.replace(mnt(fs, "snap.tmp"), mnt(fs, "snap"))  # not armed yet: nothing happens
        assert not fs.cut_happened
        fs.arm_cut()
        write(mnt(fs, "snap.tmp"), b"two", fsync=True)
        os.replace(mnt(fs, "snap.tmp"), mnt(fs, "other"))  # another name: nothing happens
        assert not fs.cut_happened
        write(mnt(fs, "snap.tmp"), b"three", fsync=True)
        os.replace(mnt(fs, "snap.tmp"), mnt(fs, "snap"))
        assert fs.cut_happened and fs.cut_where() == str(backing / "snap.tmp")
        with open(mnt(fs, "snap"), "r+b") as f:  # after the cut: accepted, and thrown away
            f.write(b"four!")
            f.flush()
            os.fsync(f.fileno())
        fs.lose_power()
    assert (backing / "snap").read_bytes() == b"three"
    assert (backing / "other").read_bytes() == b"two"
