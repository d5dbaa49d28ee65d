"""A failed fsync is fatal (storage/durable.py): the process ends, and no later fsync of
it reports success; a store file is fsynced through the fd that wrote it."""

from __future__ import annotations

import errno
import logging
import os
import re
from pathlib import Path

import pytest

from horologe.storage import Storage, StorageConfig, check_store, durable
from horologe.storage.errors import FsyncFailedError

from .helpers import H0, msg

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ("horologe", "storage", "wheel", "cluster", "node", "pipeline")


@pytest.fixture
def exits(monkeypatch):
    """os._exit replaced by a list of the statuses asked for; the sticky failure is
    forgotten after the test (it is per process)."""
    statuses: list[int] = []
    monkeypatch.setattr(os, "_exit", statuses.append)
    monkeypatch.setattr(durable, "_failed", None)
    return statuses


def eio_on_first_fsync(monkeypatch) -> list[int]:
    """os.fsync fails with EIO once, then works (as Linux's may, over dropped pages);
    returns the fds of the calls that reached the real fsync."""
    real, calls = os.fsync, []

    def fsync(fd):
        if not calls:
            calls.append(-1)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_no_module_but_durable_calls_fsync():
    """The fatal rule holds only if every fsync goes through durable.fsync."""
    direct = re.compile(r"\bos\.(fsync|fdatasync|sync)\(")
    found = []
    for d in PACKAGE_DIRS:
        for path in (ROOT / d).rglob("*.py"):
            if path.name == "durable.py" and path.parent.name == "storage":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if direct.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{n}")
    assert found == []


def test_a_failed_fsync_of_a_store_ends_the_process_and_the_next_sync_fails_too(
    tmp_path, monkeypatch, exits, caplog
):
    """fsyncgate: after a failed fsync, Linux may have dropped the dirty pages, and a second
    fsync succeeds without writing them. A store that retried would write a sync point
    naming bytes that are not on disk. The first failure must end the process (status 74,
    a CRITICAL line naming the file and errno), and a retry must not succeed."""
    store = Storage(str(tmp_path / "s"), StorageConfig(fsync=True))
    store.apply(1, lambda tx: tx.append([msg(H0, body=b"first")]))
    calls = eio_on_first_fsync(monkeypatch)
    with caplog.at_level(logging.CRITICAL), pytest.raises(FsyncFailedError):
        store.apply(2, lambda tx: tx.append([msg(H0 + 1, body=b"second")]))
    assert exits == [durable.FSYNC_FAILED_EXIT]
    line = caplog.records[-1]
    assert line.levelno == logging.CRITICAL
    assert str(tmp_path / "s") in line.getMessage() and "errno 5" in line.getMessage()
    with pytest.raises(FsyncFailedError):  # a retry: fsync would work now, and must not be trusted
        store.apply(3, lambda tx: tx.append([msg(H0 + 2, body=b"third")]))
    assert exits == [durable.FSYNC_FAILED_EXIT] * 2
    assert calls == [-1]  # no fsync was attempted after the failure
    assert store.applied_index == 1


def test_files_written_since_the_last_sync_point_are_fsynced_through_the_fd_that_wrote_them(
    tmp_path, monkeypatch
):
    """The store keeps at most ``max_open_files`` fds, and closes an evicted hour's. A file
    written since the last sync point whose fd was closed was reopened to be fsynced: an
    fd opened after a writeback error may not see it, and an inode no fd held may have
    been evicted with it. Its fd is now held until the sync point."""
    config = StorageConfig(fsync=False, max_open_files=2, max_open_hours=1, max_cached_hours=1)
    store = Storage(str(tmp_path / "s"), config)
    for n in range(6):  # six hours: each batch creates files of its own
        batch = [msg(H0 + n * 3_600_000, body=b"m%d" % n)]
        store.apply(n + 1, lambda tx, b=batch: tx.append(b))
    assert store.journal.unsynced  # no sync point yet: every file awaits one
    opened: list[str] = []
    real_open = os.open

    def recording_open(path, flags, *args, **kwargs):
        if not flags & os.O_DIRECTORY:
            opened.append(os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", recording_open)
    store.sync()
    monkeypatch.undo()
    assert opened == []
    store.close()
    with Storage(str(tmp_path / "s")) as again:
        assert again.applied_index == 6
        check_store(again)
