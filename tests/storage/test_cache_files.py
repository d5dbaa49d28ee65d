"""Cache files (hour heads, key heads) are best effort: one that cannot be written costs a
rebuild at the next open, never a batch (storage/cache_file.py)."""

from __future__ import annotations

import errno
import os

from horologe.storage import Storage, StorageConfig, cache_file, check_store

from .helpers import H0, msg


def test_a_cache_that_cannot_be_written_fails_no_batch(tmp_path, monkeypatch):
    """A batch into a new hour evicts the oldest (one hour cached here), which saves its
    heads: a cache write that failed (no inode or space left, too many open files) raised
    out of the batch after its commit, and the replica halted with the batch applied."""
    root = str(tmp_path / "s")
    s = Storage(root, StorageConfig(fsync=False, max_cached_hours=1, max_open_hours=1))
    s.apply(1, lambda tx: tx.append([msg(H0)]))

    real = os.replace

    def full(src, dst):
        if not dst.endswith(".heads"):
            return real(src, dst)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), dst)

    monkeypatch.setattr(cache_file.os, "replace", full)
    s.apply(2, lambda tx: tx.append([msg(H0 + 3_600_000)]))  # evicts the first hour
    assert s.applied_index == 2
    assert not [name for name in os.listdir(os.path.join(root, "delay")) if name.endswith(".tmp")]
    monkeypatch.undo()
    s.close()
    s = Storage(root, StorageConfig(fsync=False))
    assert s.applied_index == 2 and len(s.hours()) == 2
    check_store(s)
    s.close()
