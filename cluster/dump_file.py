"""pysyncobj's dump file, written off the tick thread.

Format: ``u64 n | pickle(pysyncobj's raft data), n bytes | tar of the store folder``
(arcname ``store``), self-contained so pysyncobj can ship it whole to a lagging follower.

pysyncobj calls the serializer on its tick thread, which also sends heartbeats, so a dump
that reads every pending byte there stalls heartbeats and starts elections (DESIGN §5).
Here the tick thread only hard-links the store (``Storage.snapshot``, O(files), between two
applies) and starts a thread that writes the tar to ``<dump>.next``. pysyncobj asks
``state()`` on every tick (its ``serializeChecker``); once the thread is done, ``state()``
renames ``.next`` over the dump, on the tick thread, so that it never races a snapshot
pysyncobj installs from the leader (also on the tick thread). If one was installed while
the tar was being written, the older result is dropped.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import struct
import tarfile
import threading
from collections.abc import Callable

from pysyncobj import SERIALIZER_STATE

from horologe.storage.append_file import fsync_dir

log = logging.getLogger(__name__)

HEADER = struct.Struct("<Q")
assert HEADER.size == 8


class DumpWriter:
    def __init__(self, dump_path: str, link_store: Callable[[str], object]) -> None:
        """``link_store(folder)`` writes a hard-linked snapshot of the store into ``folder``."""
        self.dump_path = dump_path
        self._link_store = link_store
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._installs = 0  # snapshots installed from the leader
        self._installs_at_start = 0

    def start(self, tmp_path: str, raft_data) -> None:
        """pysyncobj's serializer (tick thread): link now, write the tar in the background."""
        staging = self.dump_path + ".dir"
        shutil.rmtree(staging, ignore_errors=True)
        self._link_store(staging)
        # pysyncobj renames tmp_path over the dump as soon as this returns: keep the
        # current dump in place meanwhile (a missing tmp_path only makes it log nothing).
        if os.path.exists(tmp_path):
            os.unlink(tmp_path)
        if os.path.exists(self.dump_path):
            os.link(self.dump_path, tmp_path)
        self._failure = None
        self._installs_at_start = self._installs
        self._thread = threading.Thread(
            target=self._write, args=(staging, raft_data), name="raft-dump", daemon=True
        )
        self._thread.start()

    def _write(self, staging: str, raft_data) -> None:
        try:
            head = pickle.dumps(raft_data, protocol=4)
            with open(self.dump_path + ".next", "wb") as f:
                f.write(HEADER.pack(len(head)) + head)
                with tarfile.open(fileobj=f, mode="w|") as tar:
                    tar.add(staging, arcname="store")
                f.flush()
                os.fsync(f.fileno())
        except BaseException as e:  # noqa: BLE001 - reported through state()
            self._failure = e
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def state(self) -> int:
        """pysyncobj's serializeChecker (tick thread); reports SUCCESS or FAILED once."""
        thread = self._thread
        if thread is None:
            return SERIALIZER_STATE.NOT_SERIALIZING
        if thread.is_alive():
            return SERIALIZER_STATE.SERIALIZING
        self._thread = None
        if self._failure is not None:
            log.warning("raft dump failed: %s", self._failure)
            return SERIALIZER_STATE.FAILED
        if self._installs != self._installs_at_start:
            os.unlink(self.dump_path + ".next")  # older than the snapshot installed meanwhile
            return SERIALIZER_STATE.FAILED
        os.replace(self.dump_path + ".next", self.dump_path)
        fsync_dir(os.path.dirname(self.dump_path))
        return SERIALIZER_STATE.SUCCESS

    def note_install(self) -> None:
        """A snapshot from the leader was installed (tick thread)."""
        self._installs += 1


def read_dump(path: str, staging: str):
    """Unpack the dump at ``path``: its store into ``<staging>/store``; returns pysyncobj's data."""
    shutil.rmtree(staging, ignore_errors=True)
    with open(path, "rb") as f:
        (n,) = HEADER.unpack(f.read(HEADER.size))
        raft_data = pickle.loads(f.read(n))
        with tarfile.open(fileobj=f, mode="r|") as tar:
            tar.extractall(staging, filter="data")
    return raft_data
