"""A file table keeps at most max_open fds, however many files it has read."""

from __future__ import annotations

import os

from horologe.storage import file_table
from horologe.storage.file_table import FileTable
from horologe.storage.magic import READY_LOG


def test_open_fds_stay_bounded_and_closed_files_reopen(tmp_path):
    writer = FileTable(str(tmp_path), {}, max_open=4)
    for n in range(20):
        writer.writable(f"ready/{n}.rdy", READY_LOG).append(b"x" * 40)
    lengths = writer.pending_lengths()
    writer.commit()
    table = FileTable(str(tmp_path), lengths, max_open=4)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(2):
        for n in range(20):
            f = table.get(f"ready/{n}.rdy")
            assert f.read(f.length - 40, 40) == b"x" * 40  # reopened when evicted
    assert len(os.listdir("/proc/self/fd")) - before <= 5  # max_open, plus the one being read
    table.close_all()
    writer.close_all()


def test_a_folder_made_for_a_new_file_is_made_durable_in_its_parent(tmp_path, monkeypatch):
    """A sync point names a file in a folder made in its batch (the first ready log of a
    topic): the folder's entry in the store's folder must be durable too, or a power
    loss can keep the file's bytes and lose the folder that names them."""
    synced: list[str] = []
    monkeypatch.setattr(file_table, "fsync_dir", synced.append)
    table = FileTable(str(tmp_path), {}, max_open=4)
    table.writable("ready/0/0.rdy", READY_LOG).append(b"x")
    table.sync()
    assert sorted(synced) == sorted(str(tmp_path / d) for d in ("", "ready", "ready/0"))
    synced.clear()
    table.writable("ready/0/1.rdy", READY_LOG).append(b"x")
    table.sync()
    assert synced == [str(tmp_path / "ready/0")]
    table.close_all()
