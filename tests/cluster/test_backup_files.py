"""A backup's files, in one process: the point, the stream, its unpacking, and a restore
(cluster/backup/). The node and the command line around them: tests/integration/test_backup.py."""

from __future__ import annotations

import errno
import os
import shutil

import pytest

from horologe.cluster.backup.manifest import BackupError, check
from horologe.cluster.backup.receive import receive
from horologe.cluster.backup.restore import restore
from horologe.cluster.backup.stream import backup_chunks
from horologe.cluster.raft.backup_point import NothingToBackUpError, take_point
from horologe.cluster.raft.dump_file import read_local
from horologe.cluster.raft.journal import read_meta
from horologe.storage import Storage, StorageConfig, check_store
from horologe.storage.store import BACKUP_DIR

from ..storage.helpers import H0, HOUR, msg
from .ticked import crash, tick, ticked_node


def _entry_at(i: int):
    return (b"entry %d" % i, i, 7)


def _store(path: str) -> Storage:
    store = Storage(path, StorageConfig(fsync=False))
    for n in range(6):
        batch = [msg(H0 + n * 3_600_000 + k, body=b"b%d" % k) for k in range(30)]
        store.apply(n + 1, lambda tx, b=batch: tx.append(b))
    store.apply(7, lambda tx: tx.seal_before(HOUR + 3))
    return store


def _backup(store: Storage, dest: str, name: str = "b1"):
    point = take_point(store, name, _entry_at, last_applied=9, term=8)
    return point, receive(backup_chunks(point, "n1", 123), dest)


def test_a_backup_holds_the_store_as_it_was_at_its_point_whatever_is_applied_after(tmp_path):
    store = _store(str(tmp_path / "store"))
    point = take_point(store, "b1", _entry_at, last_applied=9, term=8)
    # Applied after the point: appends to the very files the backup links, and a retention
    # that removes two hours; none of it is in the backup.
    store.apply(8, lambda tx: tx.append([msg(H0 + 5 * 3_600_000 + 999, body=b"after")]))
    store.apply(9, lambda tx: tx.drop_hours_before(HOUR + 2))
    manifest = receive(backup_chunks(point, "n1", 123), str(tmp_path / "backup"))
    assert manifest.store_index == 7 and manifest.raft.index == 9 and manifest.raft.term == 8
    assert manifest.raft.entries == [(8, 7, b"entry 8"), (9, 7, b"entry 9")]
    assert check(str(tmp_path / "backup")) == manifest
    with Storage(str(tmp_path / "backup" / "store"), read_only=True) as b:
        assert b.applied_index == 7
        assert check_store(b).messages == 180


def test_a_restored_folder_is_a_node_at_the_backups_index_and_term_apart_from_the_backup(tmp_path):
    store = _store(str(tmp_path / "store"))
    manifest = _backup(store, str(tmp_path / "backup"))[1]
    data = str(tmp_path / "node")
    restore(str(tmp_path / "backup"), data)
    dump = read_local(os.path.join(data, "raft", "snapshot"))
    assert dump.index == 9 and dump.store["ri"] == 7
    assert dump.raft_data[:2] == ((b"entry 9", 9, 7), (b"entry 8", 8, 7))
    meta = read_meta(os.path.join(data, "raft", "journal.meta"))
    assert meta == {"currentTerm": 8, "votedForNodeId": None, "raftCommitIndex": 9}
    inodes = {os.stat(os.path.join(tmp_path, "backup", n)).st_ino for n in manifest.files}
    for root, _dirs, files in os.walk(os.path.join(data, "store")):
        assert not inodes & {os.stat(os.path.join(root, f)).st_ino for f in files}
    with Storage(os.path.join(data, "store"), read_only=True) as s:
        assert s.applied_index == 7
        check_store(s)
    assert check(str(tmp_path / "backup")) == manifest  # only read


def test_a_corrupt_or_incomplete_backup_is_refused_with_what_is_wrong(tmp_path):
    store = _store(str(tmp_path / "store"))
    _backup(store, str(tmp_path / "backup"))
    log = os.path.join(
        tmp_path, "backup", "store", "delay", os.listdir(tmp_path / "backup" / "store" / "delay")[0]
    )
    with open(log, "r+b") as f:
        f.seek(20)
        f.write(b"\xff")
    with pytest.raises(BackupError, match="SHA-256"):
        restore(str(tmp_path / "backup"), str(tmp_path / "node"))
    assert not os.path.exists(tmp_path / "node" / "store")
    with open(log, "ab") as f:
        f.write(b"x")
    with pytest.raises(BackupError, match="manifest says"):
        check(str(tmp_path / "backup"))
    os.unlink(log)
    with pytest.raises(BackupError, match="missing"):
        check(str(tmp_path / "backup"))


def test_a_stream_cut_short_leaves_nothing(tmp_path):
    store = _store(str(tmp_path / "store"))
    point = take_point(store, "b1", _entry_at, last_applied=9, term=8)
    chunks = list(backup_chunks(point, "n1", 123, chunk=4096))
    dest = str(tmp_path / "backup")
    with pytest.raises(BackupError, match="ended before its manifest|not a whole tar"):
        receive(chunks[: len(chunks) // 2], dest)
    assert not os.path.exists(dest) and not os.path.exists(dest + ".part")
    receive(chunks, dest)
    with pytest.raises(BackupError, match="exists"):
        receive(chunks, dest)


def test_restore_refuses_a_folder_that_holds_a_node(tmp_path):
    store = _store(str(tmp_path / "store"))
    _backup(store, str(tmp_path / "backup"))
    restore(str(tmp_path / "backup"), str(tmp_path / "node"))
    with pytest.raises(BackupError, match="already holds a node's data"):
        restore(str(tmp_path / "backup"), str(tmp_path / "node"))


def _counting_moves(data: str, on_move):
    """An os.replace that calls ``on_move(k)`` before the k-th move of a file or folder
    into ``data`` (1, 2...), then moves it as os.replace does."""
    replace, moves = os.replace, []

    def counted(src, dst, **kw):
        if os.path.dirname(dst) == data:
            moves.append(dst)
            on_move(len(moves))
        return replace(src, dst, **kw)

    return counted


def test_a_restore_that_fails_between_its_two_moves_leaves_nothing_and_runs_again(tmp_path, monkeypatch):
    """The Raft files and the store are made aside and moved into the data folder one
    after the other: a failure of the second move left the first in place, which the next
    restore refused as a node's data."""
    store = _store(str(tmp_path / "store"))
    _backup(store, str(tmp_path / "backup"))
    data = str(tmp_path / "node")

    def second_fails(k: int) -> None:
        if k == 2:
            raise OSError(errno.EIO, os.strerror(errno.EIO), "the second move")

    monkeypatch.setattr(os, "replace", _counting_moves(data, second_fails))
    with pytest.raises(BackupError, match="Input/output error"):
        restore(str(tmp_path / "backup"), data)
    assert os.listdir(data) == []
    monkeypatch.undo()
    restore(str(tmp_path / "backup"), data)
    with Storage(os.path.join(data, "store"), read_only=True) as s:
        assert s.applied_index == 7


def _killed_at_the_second_move(backup: str, data: str) -> None:
    """``restore(backup, data)`` in a child process that dies as its second move into
    ``data`` begins, with no chance to undo anything (a kill, a power loss)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:

            def die(k: int) -> None:
                if k == 2:
                    os._exit(9)

            os.replace = _counting_moves(data, die)
            restore(backup, data)
            code = 0
        finally:
            os._exit(code)
    _pid, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 9


def test_a_restore_killed_between_its_two_moves_leaves_what_a_node_refuses_and_the_next_restore_replaces(
    tmp_path,
):
    """Killed between the moves, a restore leaves the Raft files without the store (never
    the store without them: a node would start on the store with an empty Raft log and
    take the entries of a new history for ones it had applied). A node started there
    halts, saying its store is behind its dump; the next restore replaces them."""
    store = _store(str(tmp_path / "store"))
    _backup(store, str(tmp_path / "backup"))
    data = str(tmp_path / "node")
    _killed_at_the_second_move(str(tmp_path / "backup"), data)
    assert not os.path.exists(os.path.join(data, "store"))
    started = tmp_path / "started"
    shutil.copytree(data, started)
    node = ticked_node(started)
    try:
        tick(node)  # pysyncobj loads the dump
        assert "has applied up to Raft index 0, but this node's Raft dump says 7" in (node.state.halted or "")
    finally:
        crash(node)
    with pytest.raises(BackupError, match="not a Horologe backup"):  # checked before anything is removed
        restore(str(tmp_path / "nothing"), data)
    assert sorted(os.listdir(os.path.join(data, "raft"))) == ["journal.meta", "snapshot"]
    restore(str(tmp_path / "backup"), data)
    assert sorted(os.listdir(data)) == ["raft", "store"]
    with Storage(os.path.join(data, "store"), read_only=True) as s:
        assert s.applied_index == 7
    assert read_local(os.path.join(data, "raft", "snapshot")).index == 9


def test_nothing_to_back_up_before_two_entries_and_leftover_links_go_at_open(tmp_path):
    store = _store(str(tmp_path / "store"))
    with pytest.raises(NothingToBackUpError):
        take_point(store, "b1", _entry_at, last_applied=1, term=1)
    take_point(store, "b2", _entry_at, last_applied=9, term=8)  # a backup a stop cut short
    store.close()
    assert os.path.isdir(tmp_path / "store" / BACKUP_DIR)
    Storage(str(tmp_path / "store")).close()
    assert not os.path.exists(tmp_path / "store" / BACKUP_DIR)


def test_a_backup_being_sent_outlives_a_snapshot_installed_meanwhile(tmp_path):
    """A follower far behind installs the leader's snapshot (Storage.restore) while a backup
    of it is being sent: the backup's links stay, and the stream goes on to its end."""
    store = _store(str(tmp_path / "store"))
    point = take_point(store, "b1", _entry_at, last_applied=9, term=8)
    snapshot = str(tmp_path / "snapshot")
    _store(str(tmp_path / "leader")).snapshot(snapshot)
    store.restore(snapshot)
    assert os.path.isdir(point.folder)
    manifest = receive(backup_chunks(point, "n1", 123), str(tmp_path / "backup"))
    assert manifest.store_index == 7 and check(str(tmp_path / "backup")) == manifest


def test_a_destination_named_with_a_trailing_slash_is_the_folder_it_names(tmp_path):
    store = _store(str(tmp_path / "store"))
    point = take_point(store, "b1", _entry_at, last_applied=9, term=8)
    dest = str(tmp_path / "backup") + os.sep
    manifest = receive(backup_chunks(point, "n1", 123), dest)
    assert check(str(tmp_path / "backup")) == manifest
    assert sorted(os.listdir(tmp_path)) == ["backup", "store"]


def _fill(disk: str, leave_kb: int) -> str:
    """A ballast file that leaves about ``leave_kb`` free on ``disk``; its path."""
    ballast = os.path.join(disk, "ballast")
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(ballast, "wb") as f:
        f.write(b"\0" * max(0, free - leave_kb * 1024))
    return ballast


@pytest.mark.root
def test_a_backup_or_restore_that_fills_the_disk_leaves_nothing_and_runs_again_once_there_is_room(
    tmp_path, mount_tmpfs
):
    """Both ended in an OSError traceback; the restore left a half-made store that its
    next run refused as a node's data."""
    store = _store(str(tmp_path / "store"))
    point = take_point(store, "b1", _entry_at, last_applied=9, term=8)
    chunks = list(backup_chunks(point, "n1", 123))
    (tmp_path / "disk").mkdir()
    disk = mount_tmpfs(str(tmp_path / "disk"), "1m")
    ballast = _fill(disk, 24)
    dest, data = os.path.join(disk, "backup"), os.path.join(disk, "node")
    with pytest.raises(BackupError, match="No space left on device"):
        receive(chunks, dest)
    assert os.listdir(disk) == ["ballast"]
    os.unlink(ballast)
    receive(chunks, dest)
    ballast = _fill(disk, 24)
    with pytest.raises(BackupError, match="No space left on device"):
        restore(dest, data)
    assert os.listdir(data) == []
    os.unlink(ballast)
    restore(dest, data)
    with Storage(os.path.join(data, "store"), read_only=True) as s:
        assert s.applied_index == 7


def test_a_backup_whose_folder_cannot_be_made_says_why(tmp_path):
    """A file in the way ended in a FileExistsError or NotADirectoryError traceback."""
    store = _store(str(tmp_path / "store"))
    chunks = list(backup_chunks(take_point(store, "b1", _entry_at, last_applied=9, term=8), "n1", 123))
    (tmp_path / "b.part").write_text("someone's file")
    with pytest.raises(BackupError, match=r"b.part exists and is not a backup's unfinished folder"):
        receive(chunks, str(tmp_path / "b"))
    assert (tmp_path / "b.part").read_text() == "someone's file"
    (tmp_path / "c.part").mkdir()
    (tmp_path / "c.part" / "notes.txt").write_text("mine")
    with pytest.raises(BackupError, match=r"c.part exists and is not a backup's unfinished folder"):
        receive(chunks, str(tmp_path / "c"))
    assert (tmp_path / "c.part" / "notes.txt").read_text() == "mine"
    (tmp_path / "file").write_text("x")
    with pytest.raises(BackupError, match="Not a directory"):
        receive(chunks, str(tmp_path / "file" / "b"))


def test_two_backups_into_one_folder_at_once_the_second_is_refused_and_the_first_is_whole(tmp_path):
    """Two runs of a cron job that overlap, with one --to: the second took the first's
    .part for one left over and removed it, both wrote into the folder made again, and the
    first named its backup done over files of both (or missing)."""
    import threading

    store = _store(str(tmp_path / "store"))
    chunks = list(
        backup_chunks(take_point(store, "b1", _entry_at, last_applied=9, term=8), "n1", 123, chunk=4096)
    )
    halfway, go_on = threading.Event(), threading.Event()

    def slow():
        for k, chunk in enumerate(chunks):
            if k == len(chunks) // 2:
                halfway.set()
                go_on.wait(10)
            yield chunk

    dest = str(tmp_path / "b")
    first = threading.Thread(target=receive, args=(slow(), dest))
    first.start()
    assert halfway.wait(10)
    with pytest.raises(BackupError, match="another backup is being written into"):
        receive(chunks, dest)
    go_on.set()
    first.join(10)
    check(dest)
    assert sorted(os.listdir(tmp_path)) == ["b", "store"]  # no .part, no .lock
    receive(chunks, str(tmp_path / "new" / "folders" / "c"))  # its folders made, as before
    check(str(tmp_path / "new" / "folders" / "c"))
    with pytest.raises(BackupError, match="exists"):
        receive(chunks, dest)


def test_an_fsync_that_fails_in_a_receive_or_a_restore_says_so_and_leaves_nothing(tmp_path, monkeypatch):
    """A failed fsync ends a node's process at once (storage/durable.py); in a backup's
    receive or a restore it did the same, with a message about the node's Raft state, and
    left the .part or .restoring folder behind."""
    from horologe.storage import durable

    store = _store(str(tmp_path / "store"))
    chunks = list(backup_chunks(take_point(store, "b1", _entry_at, last_applied=9, term=8), "n1", 123))
    receive(chunks, str(tmp_path / "good"))

    def no_exit(code):
        raise AssertionError(f"the process was ended ({code})")

    def eio(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "_exit", no_exit)
    monkeypatch.setattr(durable.os, "fsync", eio)
    with pytest.raises(BackupError, match=r"writing .* to disk failed: Input/output error"):
        receive(chunks, str(tmp_path / "b"))
    assert not os.path.exists(tmp_path / "b.part") and not os.path.exists(tmp_path / "b")
    with pytest.raises(BackupError, match=r"restoring into .* failed: writing .* to disk failed"):
        restore(str(tmp_path / "good"), str(tmp_path / "node"))
    assert os.listdir(tmp_path / "node") == []
    assert durable.failed() is None  # nothing remembered: a node's fsyncs are not failed for it


def test_a_backup_that_cannot_be_read_says_which_file(tmp_path):
    """An unreadable manifest or store file (its owner's permissions, an I/O error) ended
    in an OSError traceback."""
    store = _store(str(tmp_path / "store"))
    _backup(store, str(tmp_path / "backup"))
    manifest = tmp_path / "backup" / "backup.json"
    manifest.unlink()
    manifest.mkdir()  # read as a file: IsADirectoryError, as a PermissionError would be
    with pytest.raises(BackupError, match=r"cannot read .*backup.json: Is a directory"):
        restore(str(tmp_path / "backup"), str(tmp_path / "node"))


def test_a_failed_fsync_after_the_last_rename_keeps_nothing_or_a_whole_restore(tmp_path, monkeypatch):
    """The fsync of the folder a backup was renamed into failed: the message said nothing
    was kept, and the backup was there (the next run: "exists"). The fsync after a
    restore's last move, of its empty stage's removal, failed a restore made whole."""
    from horologe.cluster.backup import receive as receiving
    from horologe.cluster.backup import restore as restoring
    from horologe.storage.errors import FsyncFailedError

    store = _store(str(tmp_path / "store"))
    chunks = list(backup_chunks(take_point(store, "b1", _entry_at, last_applied=9, term=8), "n1", 123))
    synced = receiving.fsync_dir

    def parent_fails(path):
        if os.path.abspath(path) == str(tmp_path):
            raise FsyncFailedError(path, errno.EIO, os.strerror(errno.EIO))
        synced(path)

    monkeypatch.setattr(receiving, "fsync_dir", parent_fails)
    with pytest.raises(BackupError, match="nothing was kept"):
        receive(chunks, str(tmp_path / "b"))
    assert not os.path.exists(tmp_path / "b") and not os.path.exists(tmp_path / "b.part")
    monkeypatch.undo()
    receive(chunks, str(tmp_path / "b"))
    data, calls = str(tmp_path / "node"), []

    def third_fails(path):
        calls.append(path)
        if path == data and calls.count(data) == 3:  # after the two moves: the stage's removal
            raise FsyncFailedError(path, errno.EIO, os.strerror(errno.EIO))
        synced(path)

    monkeypatch.setattr(restoring, "fsync_dir", third_fails)
    restore(str(tmp_path / "b"), data)
    assert sorted(os.listdir(data)) == ["raft", "store"]
