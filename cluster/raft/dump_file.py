"""pysyncobj's dump file: a manifest of the store, never its data.

pysyncobj keeps one "full dump" per node (``raft/snapshot``): it asks for one when it
compacts its log, reads it back at start and when the leader sends one, and ships it
to a follower that is too far behind for the log. Ours never holds the data itself:

* **The local dump** (``raft/snapshot``)::

      magic "HZSNAP" v1 | frame(msgpack {"index": int, "raft": bytes, "store": checkpoint})

  ``raft`` is pysyncobj's own data, pickled (its cluster is a set of node objects);
  ``store`` is the store's journal checkpoint at ``index`` (``Storage.checkpoint_record``):
  every file and its committed length. Store files are append-only below their committed
  length, so the live files' prefixes *are* the snapshot until retention removes them.
  Writing a dump costs a dict of file lengths and one fsync, on the tick thread between
  two applies: the same with 10³ or 10⁷ messages pending.

  The store is durable (fsynced) at every index it applied, so at start it is never
  behind its own dump unless it ran with ``fsync = false`` and the machine lost power;
  that is refused (:class:`StoreBehindDumpError`) rather than served.

* **The shipped dump**, which a follower receives (``snapshot_stream.py`` makes it from
  the manifest and the live files, chunk by chunk) into ``raft/snapshot.incoming``,
  fsynced whole before it is installed::

      magic "HZSHIP" v1 | frame(pickled raft data) | tar of a store folder (arcname "store")

  Installing it unpacks the tar (O(data): it is a catch-up) into ``raft/snapshot.restore``,
  restores the store from it, then puts a local dump in place of the node's own and
  removes the shipped file. Until then the node's own dump stays: a stop during the
  install leaves the node its own dump and journal (the leftovers are removed at start).
  A previous version received the shipped dump under the dump's own name; such a file is
  installed at start. One without a magic is an older shipped format (``u64 n | pickle,
  n bytes | tar``), read as one.

Both pickle pysyncobj's node objects, our :class:`~horologe.cluster.raft.dial_node.DialNode`,
by module and class name. Dumps written before the module moved into ``cluster/raft/``
name ``horologe.cluster.dial_node``; :func:`load_raft_data` reads them under the name it
has now (:data:`MOVED_MODULES`), so a node upgraded over such a dump does not halt.
"""

from __future__ import annotations

import io
import logging
import os
import pickle
import shutil
import struct
import tarfile
import time
from collections.abc import Callable
from typing import NamedTuple

import msgpack
from pysyncobj import SERIALIZER_STATE

from horologe.storage.durable import fsync, fsync_dir
from horologe.storage.errors import CorruptLogError
from horologe.storage.framing import FRAME_HEAD, FRAME_OVERHEAD, frame, read_frame
from horologe.storage.magic import MAGIC_SIZE, RAFT_DUMP, RAFT_SHIPPED, magic

from ..errors import StoreBehindDumpError

log = logging.getLogger(__name__)

LEGACY_HEADER = struct.Struct("<Q")
# Modules whose classes older dumps pickled, under the names they have now.
MOVED_MODULES = {"horologe.cluster.dial_node": "horologe.cluster.raft.dial_node"}


class _RaftDataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        return super().find_class(MOVED_MODULES.get(module, module), name)


def load_raft_data(data: bytes):
    """pysyncobj's raft data, pickled in a dump of this version or an older one."""
    return _RaftDataUnpickler(io.BytesIO(data)).load()


# What a stop can leave beside the dump: a linked store folder and a tar being written (a
# previous version's), a shipped dump being received or installed, pysyncobj's own temp file.
LEFTOVERS = ("snapshot.dir", "snapshot.next", "snapshot.restore", "snapshot.incoming", "snapshot.1.tmp")


class DumpFigures(NamedTuple):
    """The last dump this process wrote: for status and metrics."""

    index: int
    seconds: float  # to take the checkpoint and write the manifest, fsync included
    manifest_bytes: int  # the dump file itself
    store_bytes: int  # the store files it names, up to their committed lengths: what shipping it sends


class LocalDump(NamedTuple):
    index: int  # the last Raft index the store had applied
    raft_data: object
    store: dict  # the store's journal checkpoint at ``index``


def write_local(path: str, dump: LocalDump) -> None:
    """Write ``dump`` to ``path``, fsynced (the caller renames it and fsyncs the folder)."""
    raft = pickle.dumps(dump.raft_data, protocol=4)
    record = {"index": dump.index, "raft": raft, "store": dump.store}
    with open(path, "wb") as f:
        f.write(magic(RAFT_DUMP) + frame(msgpack.packb(record, use_bin_type=True)))
        f.flush()
        fsync(f.fileno(), path)


def read_local(path: str) -> LocalDump | None:
    """The local dump at ``path``, or None if the file there is a shipped one."""
    with open(path, "rb") as f:
        if f.read(MAGIC_SIZE) != magic(RAFT_DUMP):
            return None
        buf = bytes(MAGIC_SIZE) + f.read()
    try:
        record = msgpack.unpackb(read_frame(buf, MAGIC_SIZE, path), raw=False, strict_map_key=False)
        return LocalDump(int(record["index"]), load_raft_data(record["raft"]), record["store"])
    except (ValueError, TypeError, KeyError, msgpack.UnpackException, pickle.UnpicklingError) as e:
        raise CorruptLogError(path, MAGIC_SIZE, f"unreadable dump manifest: {e}") from e


def shipped_head(raft_data_pickled: bytes) -> bytes:
    """What a shipped dump starts with, before its tar."""
    return magic(RAFT_SHIPPED) + frame(raft_data_pickled)


def read_shipped(path: str, staging: str):
    """Unpack the shipped dump at ``path``: its store into ``<staging>/store``; returns the raft data."""
    shutil.rmtree(staging, ignore_errors=True)
    with open(path, "rb") as f:
        head = f.read(MAGIC_SIZE)
        if head == magic(RAFT_SHIPPED):
            (n,) = FRAME_HEAD.unpack(f.read(FRAME_HEAD.size))
            f.seek(MAGIC_SIZE)
            raft_data = load_raft_data(read_frame(f.read(n + FRAME_OVERHEAD), 0, path))
        elif len(head) == LEGACY_HEADER.size:  # the previous version's format: u64 n | pickle | tar
            (n,) = LEGACY_HEADER.unpack(head)
            raft_data = load_raft_data(f.read(n))
        else:
            raise CorruptLogError(path, 0, "not a Raft dump")
        with tarfile.open(fileobj=f, mode="r|") as tar:
            tar.extractall(staging, filter="data")
    return raft_data


def check_not_behind(dump: LocalDump, applied_index: int, data_dir: str) -> None:
    """Refuse a store that lost writes the dump names. The store's index in the dump's
    checkpoint is what counts, not the dump's Raft index: the entries past the store's
    last, up to the dump's, are pysyncobj's own (a new leader's no-op), never the store's."""
    held = dump.store.get("ri", dump.index)
    if held > applied_index:
        raise StoreBehindDumpError(
            f"the store in {data_dir} has applied up to Raft index {applied_index}, but this "
            f"node's Raft dump says {held}: it lost writes it had applied (fsync = false and a "
            "power loss?). Move this node's data folder away and start it empty: it will catch "
            "up from the leader."
        )


class DumpWriter:
    """pysyncobj's serializer and serializeChecker (both on the tick thread)."""

    def __init__(self, dump_path: str, checkpoint: Callable[[], dict]) -> None:
        """``checkpoint()`` is the store's ``checkpoint_record()`` (tick thread)."""
        self.dump_path = dump_path
        # A dump the leader ships is received here, beside this node's own, which it
        # replaces only once installed (snapshot_stream.py, ShippingSerializer).
        self.incoming_path = dump_path + ".incoming"
        self.folder = os.path.dirname(dump_path)
        self._checkpoint = checkpoint
        self._done: int | None = None  # SUCCESS or FAILED, reported once by state()
        self._pending: int | None = None
        self._tmp = ""  # where the dump being written goes, before pysyncobj renames it
        self._remove_leftovers()
        self.index: int | None = None  # the current dump's, once one is written or read
        self.last: DumpFigures | None = None  # of the last dump written (any thread reads)

    def current(self) -> LocalDump | None:
        dump = read_local(self.dump_path) if os.path.exists(self.dump_path) else None
        if dump is not None:
            self.index = dump.index
        return dump

    def held_to(self) -> int:
        """The Raft index up to which the local dump holds the log, as pysyncobj loads it
        (its last entry's: an installed dump's ``index`` is the store's, which may be past
        it). 0 without a local dump, or with one that cannot be read (loading it halts the
        replica and says why: this read must not end the process first)."""
        try:
            dump = self.current()
            return dump.raft_data[0][1] if dump is not None else 0
        except Exception:  # noqa: BLE001 - a damaged or foreign dump: the journal assumes none
            return 0

    def start(self, tmp_path: str, raft_data) -> None:
        """pysyncobj's serializer: write the manifest to ``tmp_path``.

        pysyncobj renames ``tmp_path`` over the dump when this returns; :meth:`state`
        then makes the rename durable before the journal drops what the dump covers.
        """
        began = time.monotonic()
        self._tmp = tmp_path
        try:
            # raft_data: (last applied entry, the entry before it, cluster); entry: (command, index, term)
            dump = LocalDump(raft_data[0][1], raft_data, self._checkpoint())
            write_local(tmp_path, dump)
        except Exception as e:  # noqa: BLE001 - a full disk (the checkpoint syncs the store), a bug
            # FAILED, not raised: pysyncobj would swallow it and wait for a state no call gives,
            # and take no dump again.
            log.warning("raft dump failed: %s", e)
            if os.path.exists(tmp_path):
                os.unlink(tmp_path)
            self._done = SERIALIZER_STATE.FAILED
            return
        self._done, self._pending = SERIALIZER_STATE.SUCCESS, dump.index
        took = time.monotonic() - began
        files = dump.store["files"]
        self.last = DumpFigures(dump.index, took, os.path.getsize(tmp_path), sum(files.values()))
        log.info("raft dump at index %d (%d store files) in %.1f ms", dump.index, len(files), took * 1000)

    @property
    def finished(self) -> bool:
        """A dump was written and :meth:`state` has not reported it yet."""
        return self._done is not None

    def state(self) -> int:
        """pysyncobj's serializeChecker; reports SUCCESS or FAILED once after :meth:`start`."""
        done, self._done = self._done, None
        if done is None:
            return SERIALIZER_STATE.NOT_SERIALIZING
        if done == SERIALIZER_STATE.SUCCESS and os.path.exists(self._tmp):
            # pysyncobj's rename failed: the dump in place is the one before
            log.warning("raft dump failed: %s was not renamed into place", self._tmp)
            os.unlink(self._tmp)
            return SERIALIZER_STATE.FAILED
        if done == SERIALIZER_STATE.SUCCESS:
            fsync_dir(self.folder)  # pysyncobj's rename, before the journal is cut
            self.index = self._pending
        return done

    def replace(self, dump: LocalDump) -> None:
        """Put ``dump`` in place of the current file (a shipped one, just installed), and
        drop the shipped file it came from."""
        write_local(self.dump_path + ".tmp", dump)
        os.replace(self.dump_path + ".tmp", self.dump_path)
        fsync_dir(self.folder)
        self.index = dump.index
        if os.path.exists(self.incoming_path):
            os.unlink(self.incoming_path)  # a stop before this leaves it, removed at start

    def _remove_leftovers(self) -> None:
        for name in os.listdir(self.folder):
            path = os.path.join(self.folder, name)
            if name in LEFTOVERS:
                shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.unlink(path)
