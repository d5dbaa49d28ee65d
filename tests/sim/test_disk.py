"""The simulated disk's failed fsync (sim/disk.py): reported once, its pages a hole on the
disk, and the node's process ended through storage/durable.py."""

from __future__ import annotations

import errno
import os
import random

import pytest

from horologe.storage import durable
from sim.disk import ProcessExit, SyncedDisk
from sim.run import sim_root
from sim.world import fresh_dir


@pytest.fixture
def disk():
    folder = fresh_dir(os.path.join(sim_root(), f"disk-test-{os.getpid()}"))
    node = os.path.join(folder, "n1")
    os.mkdir(node)
    disk = SyncedDisk()
    disk.install(folder)
    try:
        yield disk, node
    finally:
        disk.uninstall()
        durable.forget_failure()
        fresh_dir(folder)
        os.rmdir(folder)


def test_a_failed_fsync_fails_once_and_its_pages_never_reach_the_disk(disk):
    disk, node = disk
    path = os.path.join(node, "log")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, b"synced")
        os.fsync(fd)
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


def test_after_a_power_loss_what_is_written_over_the_lost_pages_is_synced(disk):
    """The pages a failed fsync left clean go with the power: a restarted node's writes at
    those offsets reach the disk at its next fsync (a hole left there read as a corrupt
    journal at the following power loss)."""
    disk, node = disk
    path = os.path.join(node, "journal")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, b"synced")
        os.fsync(fd)
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
