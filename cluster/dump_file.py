"""pysyncobj's dump file: a small manifest beside a hard-linked copy of the store.

pysyncobj keeps one "full dump" per node (``raft/snapshot``): it asks for one when it
compacts its log, reads it back at start and when the leader sends one, and ships it
to a follower that is too far behind for the log. Ours never holds the data itself:

* **The local dump** (``raft/snapshot``)::

      magic "HZSNAP" v1 | frame(msgpack {"store": folder name, "index": int, "raft": bytes})

  ``raft`` is pysyncobj's own data, pickled (its cluster is a set of node objects);
  ``store`` names the folder beside it, ``snapshot.store.<index>``, that
  ``Storage.snapshot`` filled with hard links of the store's append-only files and a
  checkpoint naming their committed lengths. Writing it is O(files), on the tick thread,
  between two applies: nothing reads the pending data, so a snapshot costs the same
  with 10³ or 10⁷ messages pending and no thread is needed.

* **The shipped dump**, which a follower receives (``snapshot_stream.py`` writes it
  from a local dump, lazily, chunk by chunk) and pysyncobj stores under the same name::

      magic "HZSHIP" v1 | frame(pickled raft data) | tar of the store folder (arcname "store")

  Installing it unpacks the tar (O(data): it is a catch-up) and then replaces the
  shipped file with a local dump of the restored store, so the next start reads only
  the manifest. A file without a magic is the previous version's shipped format
  (``u64 n | pickle, n bytes | tar``) and is read as one.

Folders no dump names are removed once no shipment reads them (:meth:`DumpWriter.acquire`).
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import struct
import tarfile
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

import msgpack
from pysyncobj import SERIALIZER_STATE

from horologe.storage.append_file import fsync_dir
from horologe.storage.errors import CorruptLogError
from horologe.storage.framing import FRAME_HEAD, FRAME_OVERHEAD, frame, read_frame
from horologe.storage.magic import MAGIC_SIZE, RAFT_DUMP, RAFT_SHIPPED, magic

log = logging.getLogger(__name__)

STORE_PREFIX = "snapshot.store."
LEGACY_HEADER = struct.Struct("<Q")


class LocalDump(NamedTuple):
    store: str  # absolute path of the hard-linked store folder
    index: int  # the last Raft index the store folder holds
    raft_data: object


def write_local(path: str, store_dir: str, index: int, raft_data) -> None:
    """Write a local dump naming ``store_dir`` (a sibling of ``path``) to ``path``, fsynced."""
    raft = pickle.dumps(raft_data, protocol=4)
    record = {"store": os.path.basename(store_dir), "index": index, "raft": raft}
    with open(path, "wb") as f:
        f.write(magic(RAFT_DUMP) + frame(msgpack.packb(record, use_bin_type=True)))
        f.flush()
        os.fsync(f.fileno())


def read_local(path: str) -> LocalDump | None:
    """The local dump at ``path``, or None if the file there is a shipped one."""
    with open(path, "rb") as f:
        if f.read(MAGIC_SIZE) != magic(RAFT_DUMP):
            return None
        buf = bytes(MAGIC_SIZE) + f.read()
    try:
        record = msgpack.unpackb(read_frame(buf, MAGIC_SIZE, path), raw=False)
        store = os.path.join(os.path.dirname(path), record["store"])
        return LocalDump(store, int(record["index"]), pickle.loads(record["raft"]))
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
            raft_data = pickle.loads(read_frame(f.read(n + FRAME_OVERHEAD), 0, path))
        elif len(head) == LEGACY_HEADER.size:  # the previous version's format: u64 n | pickle | tar
            (n,) = LEGACY_HEADER.unpack(head)
            raft_data = pickle.loads(f.read(n))
        else:
            raise CorruptLogError(path, 0, "not a Raft dump")
        with tarfile.open(fileobj=f, mode="r|") as tar:
            tar.extractall(staging, filter="data")
    return raft_data


def fsync_tree(folder: str) -> None:
    """fsync every folder under ``folder`` (its links' names), deepest first."""
    for dirpath, _dirs, _files in os.walk(folder, topdown=False):
        fsync_dir(dirpath)


class DumpWriter:
    """pysyncobj's serializer and serializeChecker (tick thread), and the store folders' keeper."""

    def __init__(self, dump_path: str, link_store: Callable[[str], object]) -> None:
        """``link_store(folder)`` writes a hard-linked snapshot of the store into ``folder``."""
        self.dump_path = dump_path
        self.folder = os.path.dirname(dump_path)
        self._link_store = link_store
        self._done: int | None = None  # SUCCESS or FAILED, reported once by state()
        self._in_use: Counter[str] = Counter()  # store folders that shipments are reading
        self.remove_unnamed()

    def current(self) -> LocalDump | None:
        if not os.path.exists(self.dump_path):
            return None
        return read_local(self.dump_path)

    def start(self, tmp_path: str, raft_data) -> None:
        """pysyncobj's serializer: link the store, write the manifest to ``tmp_path``.

        pysyncobj renames ``tmp_path`` over the dump when this returns; :meth:`state`
        then makes the rename durable before the journal drops what the dump covers.
        """
        # raft_data: (last applied entry, the entry before it, cluster); entry: (command, index, term)
        index = raft_data[0][1]
        store_dir = os.path.join(self.folder, f"{STORE_PREFIX}{index}")
        try:
            shutil.rmtree(store_dir, ignore_errors=True)
            self._link_store(store_dir)
            fsync_tree(store_dir)
            fsync_dir(self.folder)
            write_local(tmp_path, store_dir, index, raft_data)
            self._done = SERIALIZER_STATE.SUCCESS
        except OSError as e:
            log.warning("raft dump failed: %s", e)
            shutil.rmtree(store_dir, ignore_errors=True)
            if os.path.exists(tmp_path):
                os.unlink(tmp_path)
            self._done = SERIALIZER_STATE.FAILED

    def state(self) -> int:
        """pysyncobj's serializeChecker; reports SUCCESS or FAILED once after :meth:`start`."""
        done, self._done = self._done, None
        if done is None:
            return SERIALIZER_STATE.NOT_SERIALIZING
        if done == SERIALIZER_STATE.SUCCESS:
            fsync_dir(self.folder)  # pysyncobj's rename, before the journal is cut
            self.remove_unnamed()
        return done

    def install_local(self, link_store: Callable[[str], object], index: int, raft_data) -> None:
        """Replace the dump (a shipped one, just installed) with a local dump of the store."""
        store_dir = os.path.join(self.folder, f"{STORE_PREFIX}{index}")
        shutil.rmtree(store_dir, ignore_errors=True)
        link_store(store_dir)
        fsync_tree(store_dir)
        write_local(self.dump_path + ".tmp", store_dir, index, raft_data)
        os.replace(self.dump_path + ".tmp", self.dump_path)
        fsync_dir(self.folder)
        self.remove_unnamed()

    def acquire(self) -> LocalDump | None:
        """The current local dump, its store folder kept until :meth:`release`."""
        dump = self.current()
        if dump is not None:
            self._in_use[dump.store] += 1
        return dump

    def release(self, dump: LocalDump) -> None:
        self._in_use[dump.store] -= 1
        if self._in_use[dump.store] <= 0:
            del self._in_use[dump.store]
            self.remove_unnamed()

    def remove_unnamed(self) -> None:
        """Remove store folders and leftovers that neither the dump nor a shipment uses."""
        try:
            named = self.current()
        except CorruptLogError:
            return  # keep everything: the dump is refused at start, with its folder
        keep = set(self._in_use) | ({named.store} if named else set())
        for name in os.listdir(self.folder):
            path = os.path.join(self.folder, name)
            if name.startswith(STORE_PREFIX) and path not in keep:
                shutil.rmtree(path, ignore_errors=True)
            elif name in ("snapshot.dir", "snapshot.next", "snapshot.restore"):  # older versions'
                shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.unlink(path)
