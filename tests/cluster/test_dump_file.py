"""The Raft dump: a manifest and a hard-linked store; shipped as a tar made on the fly."""

from __future__ import annotations

import io
import os
import pickle
import struct
import tarfile

import pytest
from pysyncobj import SERIALIZER_STATE

from horologe.cluster.dump_file import STORE_PREFIX, DumpWriter, read_local, read_shipped
from horologe.cluster.snapshot_stream import ShippingSerializer, tar_chunks
from horologe.storage import Message, Storage, StorageConfig
from horologe.storage.errors import CorruptLogError

T = 1_767_225_600_000


def _store(path, messages: int = 50) -> Storage:
    s = Storage(str(path), StorageConfig(fsync=False))
    s.apply(1, lambda tx: tx.append([Message("t", b"x" * 100, T + 60_000 * k, T) for k in range(messages)]))
    return s


def _dump(writer: DumpWriter, index: int = 7) -> None:
    """What pysyncobj's serializer does with ours: start, rename, then ask state()."""
    tmp = writer.dump_path + ".tmp"
    writer.start(tmp, ((b"cmd", index, 1), (b"before", index - 1, 1), {"cluster"}))
    os.replace(tmp, writer.dump_path)
    assert writer.state() == SERIALIZER_STATE.SUCCESS
    assert writer.state() == SERIALIZER_STATE.NOT_SERIALIZING  # reported once


def _ship(writer: DumpWriter, path: str, chunk: int = 4096) -> None:
    dump = writer.acquire()
    try:
        with open(path, "wb") as f:
            for data in tar_chunks(dump, chunk):
                assert len(data) <= chunk
                f.write(data)
    finally:
        writer.release(dump)


def test_a_dump_is_a_small_manifest_beside_links_of_the_store(tmp_path):
    raft = tmp_path / "raft"
    raft.mkdir()
    with _store(tmp_path / "store", messages=20_000) as store:  # ~3 MB of messages
        writer = DumpWriter(str(raft / "snapshot"), store.snapshot)
        _dump(writer)
        expected = store.check()
        dump = read_local(writer.dump_path)
        assert dump.index == 7 and dump.raft_data[0] == (b"cmd", 7, 1)
        assert os.path.getsize(writer.dump_path) < 4096  # the data stays where it is
        assert os.path.basename(dump.store) == f"{STORE_PREFIX}7"
        linked = os.path.join(dump.store, "commits.log")
        assert os.path.exists(linked)
    with Storage(dump.store, read_only=True) as copy:
        assert copy.applied_index == 1 and copy.check() == expected


def test_a_shipped_dump_holds_the_store_as_it_was_at_the_dump(tmp_path):
    raft = tmp_path / "raft"
    raft.mkdir()
    with _store(tmp_path / "store") as store:
        writer = DumpWriter(str(raft / "snapshot"), store.snapshot)
        _dump(writer)
        expected = store.check()
        # The live store appends to the very files the dump links: shipping cuts them.
        store.apply(2, lambda tx: tx.append([Message("t", b"y" * 100, T + 60_000 * k, T) for k in range(50)]))
        _ship(writer, str(tmp_path / "shipped"))
    raft_data = read_shipped(str(tmp_path / "shipped"), str(tmp_path / "out"))
    assert raft_data[0] == (b"cmd", 7, 1)
    with Storage(str(tmp_path / "out" / "store"), read_only=True) as copy:
        assert copy.applied_index == 1 and copy.check() == expected


def test_older_store_folders_go_once_no_shipment_reads_them(tmp_path):
    raft = tmp_path / "raft"
    raft.mkdir()
    with _store(tmp_path / "store") as store:
        writer = DumpWriter(str(raft / "snapshot"), store.snapshot)
        _dump(writer, 7)
        shipping = writer.acquire()  # a follower is being sent the dump at 7
        _dump(writer, 9)
        folders = sorted(n for n in os.listdir(raft) if n.startswith(STORE_PREFIX))
        assert folders == [f"{STORE_PREFIX}7", f"{STORE_PREFIX}9"]
        writer.release(shipping)
        assert sorted(n for n in os.listdir(raft) if n.startswith(STORE_PREFIX)) == [f"{STORE_PREFIX}9"]
        # A restart finds the same: only what the dump names survives.
        os.makedirs(raft / f"{STORE_PREFIX}3")
        DumpWriter(str(raft / "snapshot"), store.snapshot)
        assert sorted(n for n in os.listdir(raft) if n.startswith(STORE_PREFIX)) == [f"{STORE_PREFIX}9"]


def test_the_serializer_ships_in_chunks_and_keeps_a_paused_shipment(tmp_path):
    raft = tmp_path / "raft"
    raft.mkdir()
    with _store(tmp_path / "store", messages=5_000) as store:
        writer = DumpWriter(str(raft / "snapshot"), store.snapshot)
        # pysyncobj's Serializer(fileName, batch size, use fork, serializer, deserializer, checker)
        args = (writer.dump_path, 1 << 16, False, writer.start, None, writer.state)
        serializer = ShippingSerializer(writer, *args)
        _dump(writer)
        chunks = [serializer.getTransmissionData("n2")]
        assert chunks[0][1] and not chunks[0][2]  # first, not last
        with serializer.paused(frozenset({"n2"})):
            serializer.cancelTransmisstion("n2")  # pysyncobj skips a paused follower this way
        assert serializer.shipping_to("n2")
        while not chunks[-1][2]:
            chunks.append(serializer.getTransmissionData("n2"))
        assert not serializer.shipping_to("n2") and writer._in_use == {}
        expected = store.check()
    with open(tmp_path / "shipped", "wb") as f:
        f.write(b"".join(data for data, _first, _last in chunks))
    read_shipped(str(tmp_path / "shipped"), str(tmp_path / "out"))
    with Storage(str(tmp_path / "out" / "store"), read_only=True) as copy:
        assert copy.check() == expected


def test_the_previous_versions_shipped_format_is_still_read(tmp_path):
    with _store(tmp_path / "store") as store:
        expected = store.check()
    head = pickle.dumps(("raft data", 1), protocol=4)
    buf = io.BytesIO()
    buf.write(struct.pack("<Q", len(head)) + head)
    with tarfile.open(fileobj=buf, mode="w|") as tar:
        tar.add(str(tmp_path / "store"), arcname="store")
    (tmp_path / "old").write_bytes(buf.getvalue())
    assert read_shipped(str(tmp_path / "old"), str(tmp_path / "out")) == ("raft data", 1)
    with Storage(str(tmp_path / "out" / "store"), read_only=True) as copy:
        assert copy.check() == expected


def test_a_damaged_manifest_is_refused(tmp_path):
    raft = tmp_path / "raft"
    raft.mkdir()
    with _store(tmp_path / "store") as store:
        writer = DumpWriter(str(raft / "snapshot"), store.snapshot)
        _dump(writer)
    data = bytearray((raft / "snapshot").read_bytes())
    data[20] ^= 0xFF
    (raft / "snapshot").write_bytes(bytes(data))
    with pytest.raises(CorruptLogError):
        read_local(str(raft / "snapshot"))
    DumpWriter(str(raft / "snapshot"), lambda folder: None)  # as at a start
    assert any(n.startswith(STORE_PREFIX) for n in os.listdir(raft))  # nothing removed meanwhile
