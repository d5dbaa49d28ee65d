"""Shipping the local dump to a follower, chunk by chunk, without writing or holding it.

pysyncobj sends a follower that is behind the log the bytes of its dump file, one
``getTransmissionData`` chunk per message. Our dump file is only a manifest
(``dump_file.py``), so :class:`ShippingSerializer` makes the shipped form on the fly:
the shipped head, then a tar of the hard-linked store folder the manifest names, each
append-only file cut at the committed length the folder's checkpoint records (the
live store may have appended to the same inode since). Files are opened one at a time,
read with ``pread``; the folder is kept (``DumpWriter.acquire``) until the shipment ends.

Memory: pysyncobj would queue the whole dump in one tick into the connection's write
buffer. A shipment is paused while the buffer to its follower holds more than
``SHIP_BACKLOG`` bytes (``RaftNode`` leaves the follower out of that tick's sends), so
the leader holds at most that plus one tick's chunks, whatever the store's size.
"""

from __future__ import annotations

import logging
import os
import pickle
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager

from pysyncobj.serializer import Serializer

from horologe.storage.commit_journal import CommitJournal

from .dump_file import DumpWriter, LocalDump, shipped_head

log = logging.getLogger(__name__)

SHIP_CHUNK = 512 * 1024  # bytes per message
SHIP_BACKLOG = 4 * 1024 * 1024  # bytes queued to one follower before its shipment waits
BLOCK = tarfile.BLOCKSIZE


def _store_files(folder: str) -> list[tuple[str, int]]:
    """(path relative to ``folder``, bytes to ship) for every file of a linked store folder."""
    probe = CommitJournal(folder, 1 << 30)
    probe.open(read_only=True)
    committed = dict(probe.state.files)
    out = []
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, folder)
            out.append((rel, committed.get(rel, os.path.getsize(path))))
    return sorted(out)


def tar_chunks(dump: LocalDump, chunk: int = SHIP_CHUNK) -> Iterator[bytes]:
    """The shipped form of ``dump``: its head, then a tar (arcname ``store``), in chunks."""
    pending = bytearray(shipped_head(pickle.dumps(dump.raft_data, protocol=4)))
    for rel, size in _store_files(dump.store):
        info = tarfile.TarInfo(f"store/{rel}")
        info.size, info.mode = size, 0o644
        pending += info.tobuf(tarfile.PAX_FORMAT)
        fd = os.open(os.path.join(dump.store, rel), os.O_RDONLY)
        try:
            offset = 0
            while offset < size:
                data = os.pread(fd, min(chunk, size - offset), offset)
                if not data:
                    raise OSError(f"{rel}: ends at {offset}, {size} bytes were committed")
                pending += data
                offset += len(data)
                while len(pending) >= chunk:
                    yield bytes(pending[:chunk])
                    del pending[:chunk]
        finally:
            os.close(fd)
        pending += bytes(-size % BLOCK)
    pending += bytes(2 * BLOCK)  # the tar's end
    while pending:
        yield bytes(pending[:chunk])
        del pending[:chunk]


class Shipment:
    """One follower's shipment: the dump it reads, the chunks still to send."""

    def __init__(self, dump: LocalDump) -> None:
        self.dump = dump
        self._chunks = tar_chunks(dump)
        self._next = next(self._chunks)
        self.sent = 0

    def take(self) -> tuple[bytes, bool, bool]:
        """(data, is first, is last), as pysyncobj's transmissions are."""
        data, first = self._next, self.sent == 0
        self._next = next(self._chunks, None)
        self.sent += len(data)
        return data, first, self._next is None


class ShippingSerializer(Serializer):
    """pysyncobj's Serializer, with shipments made from the local dump on the fly."""

    def __init__(self, dumps: DumpWriter, *args) -> None:
        super().__init__(*args)
        self._dumps = dumps
        self._shipments: dict[object, Shipment] = {}
        self._paused: frozenset = frozenset()

    @contextmanager
    def paused(self, nodes: frozenset):
        """While pysyncobj leaves ``nodes`` out of a tick's sends, keep their shipments."""
        self._paused = nodes
        try:
            yield
        finally:
            self._paused = frozenset()

    def getTransmissionData(self, transmissionID):  # noqa: N802, N803 - pysyncobj's names
        shipment = self._shipments.get(transmissionID)
        try:
            if shipment is None:
                dump = self._dumps.acquire()
                if dump is None:
                    return None  # nothing to ship yet: the follower is asked again next tick
                try:
                    shipment = Shipment(dump)
                except BaseException:
                    self._dumps.release(dump)
                    raise
                self._shipments[transmissionID] = shipment
                log.info("shipping the snapshot at index %d to %s", dump.index, transmissionID)
            data = shipment.take()
        except OSError as e:  # pysyncobj cannot take False here (it indexes the result)
            log.warning("shipping the snapshot to %s failed, starting over: %s", transmissionID, e)
            self.cancelTransmisstion(transmissionID)
            return None
        if data[2]:
            self.cancelTransmisstion(transmissionID)
            log.info("shipped the snapshot to %s: %d bytes", transmissionID, shipment.sent)
        return data

    def cancelTransmisstion(self, id):  # noqa: N802, A002 - pysyncobj's names (and spelling)
        if id in self._paused:
            return
        shipment = self._shipments.pop(id, None)
        if shipment is not None:
            self._dumps.release(shipment.dump)

    def cancel_all(self) -> None:
        for node in list(self._shipments):
            self.cancelTransmisstion(node)

    def shipping_to(self, node) -> bool:
        return node in self._shipments
