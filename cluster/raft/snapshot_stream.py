"""Shipping the dump to a follower, made on the fly from the live store's files.

pysyncobj sends a follower that is behind the log the bytes of its dump file, one
``getTransmissionData`` chunk per message. Our dump is only a manifest
(``dump_file.py``), so :class:`ShippingSerializer` makes the shipped form as it goes:
the shipped head, then a tar of a store folder: a ``commits.log`` holding the
manifest's checkpoint, then every file the checkpoint names, read from the live store
with ``pread`` up to its committed length (appends since then are left out). Heads
caches are not shipped: the follower rebuilds them.

Retention may remove a file before its turn comes: the shipment then waits for a newer
dump, and ``on_stale`` asks for one, which names only files that exist. A file already
opened is read to its end whatever happens to its name. A shipment that cannot go on
(that, or no dump yet) raises ``ShipmentWaits`` (seam.py): pysyncobj's send loop would
ask for the follower's next chunk again at once, for a heartbeat's time, and so ship
the same dump from its start over and over; the shell leaves the follower out of the
tick's sends instead, and out of later ticks' until a newer dump is written.

Memory: pysyncobj would queue the whole dump in one tick into the connection's write
buffer. A shipment is paused while the buffer to its follower holds more than
``SHIP_BACKLOG`` bytes (``RaftNode`` leaves the follower out of that tick's sends), so
the leader holds at most that plus one tick's chunks, whatever the store's size.
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from pysyncobj.serializer import Serializer

from horologe.storage.commit_journal import JOURNAL_NAME, checkpoint_file
from horologe.storage.durable import fsync

from . import tar_stream
from .dump_file import DumpWriter, LocalDump, shipped_head
from .seam import ShipmentWaits

log = logging.getLogger(__name__)

SHIP_CHUNK = 512 * 1024  # bytes per message
SHIP_BACKLOG = 4 * 1024 * 1024  # bytes queued to one follower before its shipment waits


def tar_chunks(dump: LocalDump, store_dir: str, chunk: int = SHIP_CHUNK) -> Iterator[bytes]:
    """The shipped form of ``dump``, the store's files read from ``store_dir``, in chunks."""
    files = (
        (f"store/{rel}", os.path.join(store_dir, rel), size)
        for rel, size in sorted(dump.store["files"].items())
    )
    head = shipped_head(pickle.dumps(dump.raft_data, protocol=4))
    journal = tar_stream.bytes_member(f"store/{JOURNAL_NAME}", checkpoint_file(dump.store))
    return tar_stream.rechunk(
        itertools.chain((head, journal), tar_stream.file_members(files, chunk), (tar_stream.END,)), chunk
    )


class Shipment:
    """One follower's shipment: the chunks still to send."""

    def __init__(self, dump: LocalDump, store_dir: str, chunk: int) -> None:
        self.index = dump.index
        self._chunks = tar_chunks(dump, store_dir, chunk)
        self._next = next(self._chunks)
        self.sent = 0

    def take(self) -> tuple[bytes, bool, bool]:
        """(data, is first, is last), as pysyncobj's transmissions are."""
        data, first = self._next, self.sent == 0
        self._next = next(self._chunks, None)
        self.sent += len(data)
        return data, first, self._next is None


class ShippingSerializer(Serializer):
    """pysyncobj's Serializer, with shipments made from the manifest and the live store."""

    def __init__(
        self, dumps: DumpWriter, store_dir: str, on_stale: Callable[[], None], chunk: int, *args
    ) -> None:
        """``args`` are pysyncobj's own; ``on_stale()`` asks for a new dump (tick thread);
        ``chunk`` is the bytes per message (``ClusterSettings.ship_chunk_bytes``)."""
        super().__init__(*args)
        self._dumps = dumps
        self._store_dir = store_dir
        self._chunk = chunk
        self._on_stale = on_stale
        self._shipments: dict[object, Shipment] = {}
        # Followers whose shipment's last chunk was taken: they receive what was queued,
        # install it, and answer nothing until then (:meth:`answered`).
        self._installing: set = set()
        self._paused: frozenset = frozenset()
        self._stale: dict[object, int] = {}  # follower -> index of the dump that failed it
        self._incoming = None  # the shipped dump being received (a follower's), open to write

    @contextmanager
    def paused(self, nodes: frozenset):
        """While pysyncobj leaves ``nodes`` out of a tick's sends, keep their shipments."""
        self._paused = nodes
        try:
            yield
        finally:
            self._paused = frozenset()

    def getTransmissionData(self, transmissionID):  # noqa: N802, N803 - pysyncobj's names
        """The next chunk for follower ``transmissionID``; :class:`ShipmentWaits` when its
        shipment cannot go on this tick (no dump yet, or a file of it is gone)."""
        shipment = self._shipments.get(transmissionID)
        try:
            if shipment is None:
                dump = self._dumps.current()
                if dump is None:  # nothing to ship yet (pysyncobj compacts only after a dump)
                    raise ShipmentWaits(transmissionID)
                shipment = self._shipments[transmissionID] = Shipment(dump, self._store_dir, self._chunk)
                log.info("shipping the snapshot at index %d to %s", dump.index, transmissionID)
            data = shipment.take()
        except OSError as e:
            log.warning("shipping the snapshot to %s failed; waiting for a newer dump: %s", transmissionID, e)
            failed = self._shipments.pop(transmissionID, None)
            self._stale[transmissionID] = failed.index if failed else self._dumps.index
            self._on_stale()
            raise ShipmentWaits(transmissionID) from e
        if data[2]:
            del self._shipments[transmissionID]
            self._installing.add(transmissionID)
            log.info(
                "shipped the snapshot at index %d to %s: %d bytes",
                shipment.index,
                transmissionID,
                shipment.sent,
            )
        return data

    def setTransmissionData(self, data):  # noqa: N802 - pysyncobj's name
        """A follower's receipt of a shipped dump, chunk by chunk: True once it is whole.

        pysyncobj wrote the chunks to a temp file that it renamed over this node's own dump
        unsynced: a power loss before the install ended left that name holding a torn or
        empty file, and the node halted at restart. The chunks go to the dump's
        ``incoming_path`` instead, fsynced whole before it is taken; the own dump stays in
        place until the installed one replaces it (``DumpWriter.replace``)."""
        if data is None:
            return False
        chunk, first, last = data
        path = self._dumps.incoming_path
        if first:
            self._close_incoming()
        elif self._incoming is None:
            return False  # a chunk of a receipt that failed or was never begun
        try:
            if first:
                self._incoming = open(path, "wb")  # noqa: SIM115 - open across messages
            self._incoming.write(chunk)
            if not last:
                return False
            self._incoming.flush()
        except OSError as e:  # a disk full, say: the leader ships again from the first chunk
            log.warning("receiving a shipped snapshot failed: %s", e)
            self._close_incoming()
            return False
        fsync(self._incoming.fileno(), path)
        self._close_incoming()
        return True

    def _close_incoming(self) -> None:
        incoming, self._incoming = self._incoming, None
        if incoming is not None:
            with suppress(OSError):  # what it holds is dropped or already fsynced
                incoming.close()

    def cancelTransmisstion(self, id):  # noqa: N802, A002 - pysyncobj's names (and spelling)
        if id not in self._paused:
            self._shipments.pop(id, None)

    def cancel_all(self) -> None:
        """This node leads no more: no shipment goes on, and no follower waits for a dump."""
        self._shipments.clear()
        self._installing.clear()
        self._stale.clear()

    def link_lost(self, node) -> None:
        """The link to ``node`` dropped, and the chunks queued in it with it: its shipment,
        if any, begins again from the first chunk."""
        self._shipments.pop(node, None)
        self._installing.discard(node)

    def forget(self, node) -> None:
        """``node`` is fed no more (a learner dropped, a member removed): its shipment ends."""
        self._shipments.pop(node, None)
        self._installing.discard(node)
        self._stale.pop(node, None)

    def in_flight(self) -> bool:
        """Whether a shipment is under way (to any follower)."""
        return bool(self._shipments)

    def held_back(self, node, backlog: Callable[[object], int]) -> bool:
        """Whether to leave ``node`` out of this tick's sends: its shipment waits for its
        connection to drain, or for a newer dump than the one that failed it."""
        if node in self._stale:
            if self._stale[node] == self._dumps.index:
                return True
            del self._stale[node]
        return self.shipping_to(node) and backlog(node) > SHIP_BACKLOG

    def shipping_to(self, node) -> bool:
        return node in self._shipments

    def answered(self, node) -> None:
        """``node`` answered an append: it takes no snapshot now."""
        self._installing.discard(node)

    def taking_snapshot(self, node) -> bool:
        """Whether ``node`` is shipped a snapshot, or installs one shipped whole: it answers
        no append until that is done."""
        return node in self._shipments or node in self._installing

    def shipping(self) -> frozenset[str]:
        """The Raft addresses of the followers a snapshot is shipped to or installed on."""
        return frozenset(node.address for node in (*self._shipments, *self._installing))
