"""The simulated disk's failed fsync (sim/disk.py): reported once, its pages a hole on the
disk, and the node's process ended through storage/durable.py."""

from __future__ import annotations

import errno
import os
import random

import numpy as np
import pytest

from horologe.storage import durable
from sim.disk import ProcessExit, SyncedDisk
from sim.run import sim_root
from sim.world import fresh_dir


def _synced(node: str, name: str) -> tuple[str, int]:
    """A file of the node's, opened to append, that holds ``synced``, fsynced."""
    path = os.path.join(node, name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
    os.write(fd, b"synced")
    os.fsync(fd)
    return path, fd


def test_a_failed_fsync_fails_once_and_its_pages_never_reach_the_disk(disk):
    disk, node = disk
    path, fd = _synced(node, "log")
    try:
        disk.fail_fsync(node, 2, errno.EIO)
        os.fsync(fd)  # the first from now: fine
        os.write(fd, b"LOST")
        with pytest.raises(OSError) as failed:
            os.fsync(fd)
        assert failed.value.errno == errno.EIO
        os.write(fd, b"later")
        os.fsync(fd)  # succeeds, as Linux's answer to a retry does
    finally:
        os.close(fd)
    assert open(path, "rb").read() == b"syncedLOSTlater"  # the page cache still has them
    disk.lose_power(node, random.Random(1))
    assert open(path, "rb").read() == b"synced\0\0\0\0later"


def test_the_process_ends_at_the_failed_fsync_and_the_other_nodes_sync_on(disk):
    disk, node = disk
    fd = os.open(os.path.join(node, "journal"), os.O_RDWR | os.O_CREAT)
    try:
        disk.fail_fsync(node, 1, errno.ENOSPC)
        with pytest.raises(ProcessExit):
            durable.fsync(fd, "journal")
        assert durable.failed() is not None  # sticky until the step that ended it is over
        assert disk.take_exited() == [(os.path.realpath(node), "journal")]
        assert durable.failed() is None
        durable.fsync(fd, "journal")  # another node's fsync, in a later step
    finally:
        os.close(fd)
    assert disk.take_exited() == []


def test_a_process_whose_exit_was_caught_exits_again_at_its_next_fsync(disk):
    """pysyncobj catches every exception of loading a dump, ProcessExit too, and the node
    runs on in that step: its next fsync finds the failure sticky (storage/durable.py) and
    exits again. That exit is the node's, not the simulator's (seed 113 with
    ``--power-loss --membership`` ended the whole run with status 74)."""
    disk, node = disk

    def simulator_exit(status: int) -> None:
        raise AssertionError(f"the simulator's own process would end with status {status}")

    disk._real_exit = simulator_exit
    fd = os.open(os.path.join(node, "journal.tmp"), os.O_RDWR | os.O_CREAT)
    try:
        disk.fail_fsync(node, 1, errno.EIO)
        with pytest.raises(ProcessExit):
            durable.fsync(fd, "journal.tmp")
        with pytest.raises(ProcessExit):  # caught above, as pysyncobj's bare except does
            durable.fsync(fd, "journal.tmp")
        assert disk.take_exited() == [(os.path.realpath(node), "journal.tmp")]
    finally:
        os.close(fd)


def test_uninstalled_the_process_exits_as_before_whatever_stood_in_for_its_exit(tmp_path):
    """The test above stands in for the simulator's own exit, and uninstall put that stand-in
    in place of ``os._exit`` for the rest of the pytest worker: a later test's forked child
    (tests/cluster/test_backup_files.py) could not exit, ran on as a second worker, and
    its parent waited for it for ever (the default suite hung)."""
    folder = fresh_dir(os.path.join(sim_root(), f"exit-test-{os.getpid()}"))
    before = os._exit
    disk = SyncedDisk()
    disk.install(folder)
    try:
        disk._real_exit = lambda status: None
    finally:
        disk.uninstall()
        os.rmdir(folder)
    assert os._exit is before


def test_after_a_power_loss_what_is_written_over_the_lost_pages_is_synced(disk):
    """The pages a failed fsync left clean go with the power: a restarted node's writes at
    those offsets reach the disk at its next fsync (a hole left there read as a corrupt
    journal at the following power loss)."""
    disk, node = disk
    path, fd = _synced(node, "journal")
    try:
        disk.fail_fsync(node, 1, errno.EIO)
        os.write(fd, b"LOST")
        with pytest.raises(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
    disk.lose_power(node, random.Random(1))
    with open(path, "r+b") as f:  # the restart cuts what a power loss tore, and goes on
        f.truncate(len(b"synced"))
        f.seek(0, os.SEEK_END)
        f.write(b"again")
        f.flush()
        os.fsync(f.fileno())
    disk.lose_power(node, random.Random(1))
    assert open(path, "rb").read() == b"syncedagain"


def test_a_failed_write_writes_a_prefix_then_the_disk_stays_full_until_disarmed(disk):
    disk, node = disk
    path = os.path.join(node, "seg")
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        os.pwrite(fd, b"head", 0)
        disk.fail_write(node, 2, errno.ENOSPC, 0.5)
        assert os.pwrite(fd, b"0123", 4) == 4  # the first from now: whole
        assert os.pwrite(fd, b"abcdefgh", 8) == 4  # the second: a short write, half of it
        with pytest.raises(OSError) as full:
            os.write(fd, b"more")
        assert full.value.errno == errno.ENOSPC
        with pytest.raises(OSError), open(os.path.join(node, "tmp"), "wb") as f:
            f.write(b"x")  # a file object's flush: the same disk
        disk.disarm(node)
        os.pwrite(fd, b"!", 12)
    finally:
        os.close(fd)
    assert open(path, "rb").read() == b"head0123abcd!"
    assert disk.write_errors == 3  # the short write, os.write, the flush at close


def test_a_write_that_fails_with_nothing_written_raises_eio(disk):
    disk, node = disk
    disk.fail_write(node, 1, errno.EIO, 0.0)
    with pytest.raises(OSError) as failed, open(os.path.join(node, "meta.tmp"), "wb") as f:
        f.write(b"term and vote")
        f.flush()
    assert failed.value.errno == errno.EIO
    assert open(os.path.join(node, "meta.tmp"), "rb").read() == b""


def test_other_folders_write_on(disk):
    disk, node = disk
    other = os.path.join(os.path.dirname(node), "n2")
    os.mkdir(other)
    disk.fail_write(node, 1, errno.ENOSPC, 0.0)
    with open(os.path.join(other, "f"), "wb") as f:
        f.write(b"fine")
    assert open(os.path.join(other, "f"), "rb").read() == b"fine"
    assert disk.write_errors == 0


def test_a_crash_in_a_write_keeps_a_prefix_and_the_dead_process_writes_nothing_more(disk):
    disk, node = disk
    path, fd = _synced(node, "journal")
    try:
        disk.crash_at_write(node, 1, 0.5, power=False)
        with pytest.raises(ProcessExit):
            os.write(fd, b"torn")
        try:  # pysyncobj's bare except swallows it; what the step does after reaches nothing
            os.write(fd, b"after")
        except ProcessExit:
            pass
        with pytest.raises(ProcessExit):
            os.fsync(fd)
        assert disk.take_crashed() == [(os.path.realpath(node), "journal", False)]
        assert disk.take_crashed() == []
    finally:
        os.close(fd)
    assert open(path, "rb").read() == b"syncedto"  # the page cache: a crash keeps it
    disk.lose_power(node, random.Random(1))
    assert open(path, "rb").read().startswith(b"synced")


def _produce(index: int) -> bytes:
    from horologe.cluster import PRODUCE, Entry
    from horologe.storage import MessageColumns
    from horologe.wheel import Watermark

    now = 1_767_225_600_000 + index
    messages = MessageColumns(
        ["a", "b"],
        [f"body {index} {'x' * 200}".encode(), b"b"],
        np.array([now + 1000, now + 2000], dtype=np.int64),
        np.full(2, now, dtype=np.int64),
        [f"k{index}", None],
    )
    return Entry(PRODUCE, Watermark(now - 200), now, messages=messages).encode()


@pytest.mark.parametrize("err", (errno.ENOSPC, errno.EIO))
def test_a_store_reopens_whole_whichever_write_of_an_apply_fails(disk, err):
    """Every write of a batch in turn fails (the disk full from then on), in a batch that is
    also a sync point and rewrites the commit journal (a small ``journal_compact_bytes``):
    the replica halts, and the store reopens at the batch before, or at that batch once its
    sync point was on disk, never refusing to open (a sync point's frame names data bytes
    that a rollback cut: "file holds X bytes; Y were committed")."""
    from dataclasses import replace

    from horologe.cluster import StateMachine
    from horologe.storage import Storage, check_store
    from sim.world import STORAGE

    disk, node = disk
    config = replace(STORAGE, journal_compact_bytes=1500)
    for after in range(1, 40):
        folder = fresh_dir(os.path.join(node, "store"))
        store = Storage(folder, config)
        state = StateMachine(store)
        index = 1
        while not store.journal.checkpoint_due or index < 3:
            assert state.apply(index, _produce(index)).error is None
            index += 1
        disk.fail_write(folder, after, err, 0.5)
        result = state.apply(index, _produce(index))
        disk.disarm(folder)
        if result.error is None:
            store.close()
            assert after > 1
            break  # the batch made fewer writes than that: every one was tried
        assert state.halted
        store.close()
        again = Storage(folder, config)
        assert again.applied_index in (index - 1, index), (after, again.applied_index)
        check_store(again)
        again.close()
    else:
        pytest.fail("the batch made 40 writes or more")


def test_out_of_order_a_power_loss_keeps_unsynced_sectors_each_by_its_own_draw(disk):
    """A disk's cache and the kernel's write-back keep no order: past the synced bytes,
    each sector is on disk whole or is zeros, a later one kept where an earlier is not."""
    disk, node = disk
    written = bytes(range(1, 256)) * 40  # 10,200 bytes past the synced 6, no zero byte
    now = b"synced" + written
    paths = []
    for seed in range(24):
        path, fd = _synced(node, f"log{seed:02}")
        os.write(fd, written)
        os.close(fd)
        paths.append(path)
    lines = disk.lose_power(node, random.Random(5), out_of_order=True)
    sectors_kept = [p for p, line in zip(paths, lines, strict=True) if line.endswith("(sectors)")]
    assert sectors_kept, lines
    gaps = 0
    for path in sectors_kept:
        kept = open(path, "rb").read()
        assert len(kept) == len(now) and kept.startswith(b"synced")
        lost = []
        for lo in range(0, len(now), 512):
            start = max(lo, 6)  # the synced bytes stay
            part = kept[start : lo + 512]
            assert part == now[start : lo + 512] or not part.strip(b"\0"), lo
            if not part.strip(b"\0"):
                lost.append(lo)
        gaps += bool(lost) and min(lost) < max(set(range(0, len(now), 512)) - set(lost))
    assert gaps  # a later sector on disk, an earlier one not
