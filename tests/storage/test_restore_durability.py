"""A restored store is durable before it is marked whole: every file it names was fsynced."""

from __future__ import annotations

import os
import shutil

from horologe.storage import Storage, StorageConfig
from horologe.storage.commit_journal import JOURNAL_NAME
from horologe.storage.store import OLD_ASIDE_MARKER, RESTORING_DIR

from .helpers import H0, HOUR, msg


def _fill(store: Storage) -> None:
    """Messages over ten hours, the first five of them sealed."""
    for n in range(10):
        batch = [msg(H0 + n * 3_600_000 + k, body=b"b%d" % k) for k in range(20)]
        store.apply(n + 1, lambda tx, b=batch: tx.append(b))
    store.apply(11, lambda tx: tx.seal_before(HOUR + 5))


def test_restore_fsyncs_every_file_it_names_sealed_hours_included(tmp_path, monkeypatch):
    """A shipped snapshot is extracted from a tar with plain writes, never fsynced; restore
    hard-links its sealed hour files. Unless each of them is fsynced before the copy is
    marked whole, a power loss after the install can bring one back short or zeroed, and
    the node does not start (CorruptLogError). An fsync of any link of an inode makes the
    file's content durable, so the inodes fsynced during restore are what is checked."""
    src = str(tmp_path / "src")
    with Storage(src, StorageConfig(fsync=False)) as s:
        _fill(s)
        s.snapshot(str(tmp_path / "snap"))
    extracted = str(tmp_path / "extracted")  # what tarfile leaves: new inodes, never fsynced
    shutil.copytree(str(tmp_path / "snap"), extracted)

    other = str(tmp_path / "other")
    o = Storage(other, StorageConfig(fsync=False))
    o.apply(1, lambda tx: tx.append([msg(H0, body=b"to be replaced")]))
    fsynced: set[tuple[int, int]] = set()
    real_fsync = os.fsync

    def recording_fsync(fd):
        st = os.fstat(fd)
        fsynced.add((st.st_dev, st.st_ino))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    o.restore(extracted)
    monkeypatch.undo()
    try:
        named = sorted(o.journal.state.files)
        sealed = [rel for rel in named if rel.startswith("delay/") and rel.endswith(".log")]
        assert len(sealed) >= 5 and o.sealed_before_hour == HOUR + 5
        unsynced = []
        for rel in [JOURNAL_NAME, *named]:
            st = os.stat(os.path.join(other, rel))
            if (st.st_dev, st.st_ino) not in fsynced:
                unsynced.append(rel)
        assert unsynced == []
    finally:
        o.close()


class Killed(BaseException):
    """The process killed where a test says."""


def test_a_restore_killed_while_it_cleans_up_keeps_the_restored_store(tmp_path, monkeypatch):
    """The last step of a restore removes its staging folder, whose two markers say the
    copy was whole and the old store set aside. Killed once the second marker was gone
    and the first not yet, the next open took the restore as unfinished and ran it
    again: it set the restored store aside as the old one and removed it, and opened empty."""
    src = str(tmp_path / "src")
    with Storage(src, StorageConfig(fsync=False)) as s:
        _fill(s)
        s.snapshot(str(tmp_path / "snap"))
    other = str(tmp_path / "other")
    o = Storage(other, StorageConfig(fsync=False))
    o.apply(1, lambda tx: tx.append([msg(H0, body=b"to be replaced")]))
    real_rmtree = shutil.rmtree

    def killed_midway(path, *args, **kwargs):
        aside = os.path.join(path, OLD_ASIDE_MARKER)
        if os.path.basename(path) != RESTORING_DIR or not os.path.exists(aside):
            return real_rmtree(path, *args, **kwargs)
        os.unlink(aside)  # rmtree's order is the directory's: this marker first
        raise Killed

    monkeypatch.setattr(shutil, "rmtree", killed_midway)
    try:
        o.restore(str(tmp_path / "snap"))
    except Killed:
        pass
    monkeypatch.undo()
    o.files.close_all()
    with Storage(other, StorageConfig(fsync=False)) as again:
        assert again.applied_index == 11 and again.sealed_before_hour == HOUR + 5
