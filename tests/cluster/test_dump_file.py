"""The Raft dump: linked on the tick thread, packed on another, swapped in by state()."""

from __future__ import annotations

import os
import time

from pysyncobj import SERIALIZER_STATE

from horologe.cluster.dump_file import DumpWriter, read_dump
from horologe.storage import Message, Storage, StorageConfig

T = 1_767_225_600_000


def _store(path) -> Storage:
    s = Storage(str(path), StorageConfig(fsync=False))
    s.apply(1, lambda tx: tx.append([Message("t", b"x" * 100, T + 60_000 * k, T) for k in range(50)]))
    return s


def _finish(writer: DumpWriter) -> int:
    deadline = time.monotonic() + 10
    while (state := writer.state()) == SERIALIZER_STATE.SERIALIZING:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return state


def test_the_dump_is_packed_off_the_calling_thread_and_swapped_in_once(tmp_path):
    dump = str(tmp_path / "snapshot")
    with _store(tmp_path / "store") as store:
        writer = DumpWriter(dump, store.snapshot)
        assert writer.state() == SERIALIZER_STATE.NOT_SERIALIZING
        writer.start(dump + ".tmp", ("raft data", 1))
        assert not os.path.exists(dump)  # the tar goes to .next; only state() renames it
        assert _finish(writer) == SERIALIZER_STATE.SUCCESS
        assert writer.state() == SERIALIZER_STATE.NOT_SERIALIZING  # reported once
        expected = store.check()
    assert read_dump(dump, str(tmp_path / "out")) == ("raft data", 1)
    with Storage(str(tmp_path / "out" / "store"), read_only=True) as copy:
        assert copy.applied_index == 1 and copy.check() == expected


def test_a_snapshot_installed_meanwhile_is_not_overwritten(tmp_path):
    dump = str(tmp_path / "snapshot")
    with _store(tmp_path / "store") as store:
        writer = DumpWriter(dump, store.snapshot)
        writer.start(dump + ".tmp", ("first", 1))
        assert _finish(writer) == SERIALIZER_STATE.SUCCESS
        with open(dump, "rb") as f:
            installed = f.read()
        writer.start(dump + ".tmp", ("older", 1))
        writer.note_install()  # the leader's snapshot arrived while the tar was written
        assert _finish(writer) == SERIALIZER_STATE.FAILED
    with open(dump, "rb") as f:
        assert f.read() == installed
    assert not os.path.exists(dump + ".next")
