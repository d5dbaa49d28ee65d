"""The Raft dump: a manifest of the store; shipped as a tar made on the fly from live files."""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import struct
import sys
import tarfile

import msgpack
import pytest
from pysyncobj import SERIALIZER_STATE

from horologe.cluster.errors import StoreBehindDumpError
from horologe.cluster.raft import dial_node
from horologe.cluster.raft.dial_node import DialNode
from horologe.cluster.raft.dump_file import (
    DumpWriter,
    LocalDump,
    check_not_behind,
    read_local,
    read_shipped,
    write_local,
)
from horologe.cluster.raft.seam import ShipmentWaits
from horologe.cluster.raft.snapshot_stream import SHIP_CHUNK, ShippingSerializer, tar_chunks
from horologe.storage import Message, Storage, StorageConfig, check_store
from horologe.storage.errors import CorruptLogError, StorageFullError
from horologe.storage.framing import frame
from horologe.storage.magic import RAFT_DUMP, magic

T = 1_767_225_600_000


def _batch(body: bytes, n: int, hours: int = 24) -> list[Message]:
    return [Message("t", body, T + (k % hours) * 3_600_000 + k, T) for k in range(n)]


def _store(path, messages: int = 50) -> Storage:
    s = Storage(str(path), StorageConfig(fsync=False))
    s.apply(1, lambda tx: tx.append(_batch(b"x" * 100, messages)))
    return s


def _dump(writer: DumpWriter, index: int = 7) -> None:
    """What pysyncobj does with our serializer: start, rename, then ask state()."""
    tmp = writer.dump_path + ".tmp"
    writer.start(tmp, ((b"cmd", index, 1), (b"before", index - 1, 1), {"cluster"}))
    os.replace(tmp, writer.dump_path)
    assert writer.state() == SERIALIZER_STATE.SUCCESS
    assert writer.state() == SERIALIZER_STATE.NOT_SERIALIZING  # reported once


def _writer(tmp_path, store: Storage) -> DumpWriter:
    (tmp_path / "raft").mkdir(parents=True, exist_ok=True)
    return DumpWriter(str(tmp_path / "raft" / "snapshot"), store.checkpoint_record)


def test_a_dump_is_a_manifest_whatever_is_pending(tmp_path):
    sizes = []
    for n, messages in enumerate((100, 20_000)):
        with _store(tmp_path / f"store{n}", messages) as store:
            writer = _writer(tmp_path / f"{n}", store)
            _dump(writer)
            dump = read_local(writer.dump_path)
            assert dump.index == 7 and dump.raft_data[0] == (b"cmd", 7, 1)
            assert dump.store == store.checkpoint_record()
            sizes.append((os.path.getsize(writer.dump_path), len(dump.store["files"])))
    (small, files), (big, same_files) = sizes
    assert same_files == files  # 200x the messages in the same hours: the same files named,
    assert big - small <= 4 * files  # only their lengths take more bytes to write


def test_a_shipped_dump_holds_the_store_as_it_was_at_the_dump(tmp_path):
    with _store(tmp_path / "store") as store:
        writer = _writer(tmp_path, store)
        _dump(writer)
        expected = check_store(store)
        # The live store appends to the very files the dump names: shipping cuts them.
        store.apply(2, lambda tx: tx.append(_batch(b"y" * 100, 50)))
        with open(tmp_path / "shipped", "wb") as f:
            for data in tar_chunks(writer.current(), store.directory, chunk=4096):
                assert len(data) <= 4096
                f.write(data)
    raft_data = read_shipped(str(tmp_path / "shipped"), str(tmp_path / "out"))
    assert raft_data[0] == (b"cmd", 7, 1)
    with Storage(str(tmp_path / "out" / "store"), read_only=True) as copy:
        assert copy.applied_index == 1 and check_store(copy) == expected


def _serializer(writer: DumpWriter, store: Storage, stale: list) -> ShippingSerializer:
    # pysyncobj's own: Serializer(fileName, batch size, use fork, serializer, deserializer, checker)
    args = (writer.dump_path, 1 << 16, False, writer.start, None, writer.state)
    return ShippingSerializer(writer, store.directory, lambda: stale.append(1), SHIP_CHUNK, *args)


def test_the_serializer_ships_in_chunks_and_keeps_a_paused_shipment(tmp_path):
    with _store(tmp_path / "store", messages=5_000) as store:
        writer = _writer(tmp_path, store)
        serializer = _serializer(writer, store, [])
        _dump(writer)
        chunks = [serializer.getTransmissionData("n2")]
        assert chunks[0][1] and not chunks[0][2]  # first, not last
        with serializer.paused(frozenset({"n2"})):
            serializer.cancelTransmisstion("n2")  # pysyncobj skips a held-back follower this way
        assert serializer.shipping_to("n2")
        while not chunks[-1][2]:
            chunks.append(serializer.getTransmissionData("n2"))
        assert not serializer.shipping_to("n2")
        expected = check_store(store)
    with open(tmp_path / "shipped", "wb") as f:
        f.write(b"".join(data for data, _first, _last in chunks))
    read_shipped(str(tmp_path / "shipped"), str(tmp_path / "out"))
    with Storage(str(tmp_path / "out" / "store"), read_only=True) as copy:
        assert check_store(copy) == expected


def _ship_until_it_waits(serializer: ShippingSerializer, node: str) -> None:
    """Take chunks for ``node`` until its shipment waits (a file of the dump is gone);
    none of them the last."""
    with pytest.raises(ShipmentWaits):
        while True:
            assert not serializer.getTransmissionData(node)[2]


def test_a_shipment_missing_a_file_waits_for_a_newer_dump(tmp_path):
    with _store(tmp_path / "store", messages=100) as store:
        writer = _writer(tmp_path, store)
        stale = []
        serializer = _serializer(writer, store, stale)
        _dump(writer)
        victim = max(writer.current().store["files"])  # the last file shipped
        os.rename(os.path.join(store.directory, victim), str(tmp_path / "aside"))  # as retention would
        _ship_until_it_waits(serializer, "n2")
        assert stale == [1] and serializer.held_back("n2", lambda node: 0)
        _dump(writer, 9)  # what the request for a dump brings about
        assert not serializer.held_back("n2", lambda node: 0)
        assert not serializer.held_back("n3", lambda node: 0)


def test_the_previous_versions_shipped_format_is_still_read(tmp_path):
    with _store(tmp_path / "store") as store:
        expected = check_store(store)
    head = pickle.dumps(("raft data", 1), protocol=4)
    buf = io.BytesIO()
    buf.write(struct.pack("<Q", len(head)) + head)
    with tarfile.open(fileobj=buf, mode="w|") as tar:
        tar.add(str(tmp_path / "store"), arcname="store")
    (tmp_path / "old").write_bytes(buf.getvalue())
    assert read_shipped(str(tmp_path / "old"), str(tmp_path / "out")) == ("raft data", 1)
    with Storage(str(tmp_path / "out" / "store"), read_only=True) as copy:
        assert check_store(copy) == expected


@contextlib.contextmanager
def _dial_node_under_its_old_module():
    """Pickles made inside name DialNode's module as releases before cluster/raft/ did:
    ``horologe.cluster.dial_node``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "horologe.cluster.dial_node", dial_node)
        mp.setattr(DialNode, "__module__", "horologe.cluster.dial_node")
        yield
    assert "horologe.cluster.dial_node" not in sys.modules


def test_dumps_of_releases_before_the_raft_folder_are_read(tmp_path):
    """Their pickles name DialNode's old module; a node upgraded over one halted at start."""
    peers = {"127.0.0.1:7001", "127.0.0.1:7002"}
    raft_data = ((b"cmd", 7, 1), (b"before", 6, 1), {DialNode(a) for a in peers})
    with _store(tmp_path / "store"):
        pass
    with _dial_node_under_its_old_module():
        # The manifest (HZSNAP), and the format before it: u64 n | pickle | tar.
        write_local(str(tmp_path / "manifest"), LocalDump(7, raft_data, {"files": {}}))
        old = pickle.dumps(raft_data, protocol=4)
        buf = io.BytesIO()
        buf.write(struct.pack("<Q", len(old)) + old)
        with tarfile.open(fileobj=buf, mode="w|") as tar:
            tar.add(str(tmp_path / "store"), arcname="store")
        (tmp_path / "tar").write_bytes(buf.getvalue())
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(old)
    for cluster in (
        read_local(str(tmp_path / "manifest")).raft_data[2],
        read_shipped(str(tmp_path / "tar"), str(tmp_path / "out"))[2],
    ):
        assert {n.address for n in cluster} == peers
        assert all(type(n) is DialNode for n in cluster)


def test_a_damaged_manifest_is_refused(tmp_path):
    with _store(tmp_path / "store") as store:
        writer = _writer(tmp_path, store)
        _dump(writer)
    data = bytearray((tmp_path / "raft" / "snapshot").read_bytes())
    data[20] ^= 0xFF
    (tmp_path / "raft" / "snapshot").write_bytes(bytes(data))
    with pytest.raises(CorruptLogError):
        read_local(str(tmp_path / "raft" / "snapshot"))


def test_the_journal_is_told_how_far_the_local_dump_holds_the_log(tmp_path):
    """What a torn frame of the journal may name (DiskJournal ``held_to``): the dump's last
    Raft entry, as pysyncobj loads it; nothing without a dump, or with one that cannot be
    read (its load halts the replica, with the reason)."""
    with _store(tmp_path / "store") as store:
        writer = _writer(tmp_path, store)
        assert writer.held_to() == 0
        _dump(writer, index=42)
        assert DumpWriter(writer.dump_path, store.checkpoint_record).held_to() == 42
        # A shipped dump at 30 installed on a store already at 42 (a stale reset): the
        # manifest's index is the store's, the log pysyncobj loads ends at 30.
        writer.replace(LocalDump(42, ((b"cmd", 30, 1), (b"before", 29, 1), set()), store.checkpoint_record()))
        assert writer.held_to() == 30
    data = bytearray((tmp_path / "raft" / "snapshot").read_bytes())
    data[20] ^= 0xFF
    (tmp_path / "raft" / "snapshot").write_bytes(bytes(data))
    assert writer.held_to() == 0
    # Raft data naming a class this release does not have (a dump of a later one, say).
    record = {"index": 9, "raft": b"cnomodule\nNoClass\n.", "store": {}}
    (tmp_path / "raft" / "snapshot").write_bytes(magic(RAFT_DUMP) + frame(msgpack.packb(record)))
    with pytest.raises(ModuleNotFoundError):
        read_local(writer.dump_path)
    assert writer.held_to() == 0


def test_a_store_behind_its_dump_is_refused():
    dump = LocalDump(9, None, {})
    check_not_behind(dump, 9, "/data")
    with pytest.raises(StoreBehindDumpError, match="Raft index 8, but this node's Raft dump says 9"):
        check_not_behind(dump, 8, "/data")


def test_a_store_is_measured_by_its_own_index_in_the_dump_not_by_pysyncobjs_no_op():
    dump = LocalDump(9, None, {"ri": 8})  # entry 9: a new leader's no-op, never the store's
    check_not_behind(dump, 8, "/data")
    with pytest.raises(StoreBehindDumpError, match="Raft index 7, but this node's Raft dump says 8"):
        check_not_behind(dump, 7, "/data")


def test_a_deposed_leader_forgets_the_followers_that_waited_for_a_newer_dump(tmp_path):
    """A follower marked to wait for a newer dump got no heartbeats from that node; if it
    leads again before a newer dump exists (none is taken while nothing is applied), the
    mark must not outlive the leadership that set it."""
    with _store(tmp_path / "store", messages=100) as store:
        writer = _writer(tmp_path, store)
        serializer = _serializer(writer, store, [])
        _dump(writer)
        victim = max(writer.current().store["files"])
        os.rename(os.path.join(store.directory, victim), str(tmp_path / "aside"))
        _ship_until_it_waits(serializer, "n2")
        assert serializer.held_back("n2", lambda node: 0)
        serializer.cancel_all()  # this node stopped leading
        assert not serializer.held_back("n2", lambda node: 0)


def test_a_dump_whose_store_checkpoint_failed_is_a_failed_dump_and_the_next_one_is_taken(tmp_path):
    """The store's checkpoint raised StorageFullError (the disk full as the dump began: its
    sync appends to commits.log): pysyncobj's serializer caught it and waited for a state
    this writer never gave, so no dump was taken again, and the journal grew for good."""
    from pysyncobj.serializer import Serializer

    with _store(tmp_path / "store") as store:
        calls = []

        def checkpoint():
            calls.append(1)
            if len(calls) == 1:
                raise StorageFullError("no space left on device")
            return store.checkpoint_record()

        (tmp_path / "raft").mkdir()
        writer = DumpWriter(str(tmp_path / "raft" / "snapshot"), checkpoint)
        serializer = Serializer(writer.dump_path, 1 << 20, False, writer.start, None, writer.state)
        data = (None, (b"cmd", 7, 1), (b"before", 6, 1), {"cluster"})
        serializer.serialize(data, 7)
        assert serializer.checkSerializing()[0] == SERIALIZER_STATE.FAILED
        serializer.serialize(data, 7)
        assert serializer.checkSerializing()[0] == SERIALIZER_STATE.SUCCESS
        assert len(calls) == 2 and read_local(writer.dump_path).index == 7


def test_a_dump_pysyncobj_could_not_rename_into_place_is_a_failed_dump(tmp_path, monkeypatch):
    """Reported written, the journal would be cut to a dump that is not the one in place."""
    from pysyncobj import serializer as upstream

    with _store(tmp_path / "store") as store:
        writer = _writer(tmp_path, store)

        def no_rename(src, dst):
            raise OSError("rename failed")

        monkeypatch.setattr(upstream, "atomicReplace", no_rename)
        s = upstream.Serializer(writer.dump_path, 1 << 20, False, writer.start, None, writer.state)
        s.serialize((None, (b"cmd", 7, 1), (b"before", 6, 1), {"cluster"}), 7)
        assert s.checkSerializing()[0] == SERIALIZER_STATE.FAILED
        assert not os.path.exists(writer.dump_path) and not os.path.exists(writer.dump_path + ".tmp")
