"""A reader of a store that another thread writes: no lock, never past a commit.

The writer (:class:`~horologe.storage.store.Storage`, on one thread) publishes a
:class:`~horologe.storage.store_reads.CommittedState` after each batch; the reader's
thread hands it to :meth:`StoreReader.follow` and then reads exactly that state. Every
file is append-only below its committed length, so the bytes a state names never
change under the reader; heads and tombstone bitmaps catch up incrementally.

One thread owns a reader: :meth:`follow` refuses a second one. When the writer
installs a snapshot (``generation`` changes) the reader reopens every file.

A reader, when asked, keeps the records of messages due soon that each state says its batch
wrote (recent_records.py: a master's view does, for its pulls), and reads those from
memory.
"""

from __future__ import annotations

import threading

from .config import StorageConfig
from .errors import StorageError
from .file_table import FileTable
from .recent_records import RecentRecords
from .store_reads import CommittedState, StoreReads


class StoreReader(StoreReads):
    def __init__(self, directory: str, config: StorageConfig, state: CommittedState) -> None:
        self.directory = directory
        self.config = config
        self.read_only = True
        self._committed = state
        self._owner: int | None = None
        self.files = FileTable(directory, dict(state.files), config.max_open_files)
        self._init_reads()
        if config.recent_records_bytes:
            self._recent = RecentRecords(config.recent_records_bytes)

    def _state(self) -> CommittedState:
        return self._committed

    @property
    def generation(self) -> int:
        """The generation of the state read at (a new one each time the writer installs a
        snapshot)."""
        return self._committed.generation

    def follow(self, state: CommittedState, keep_written: bool = True) -> None:
        """Read at ``state`` from now on (a later one than the current, from the same writer),
        keeping the records it says its batch wrote when ``keep_written`` (recent_records.py)."""
        me = threading.get_ident()
        if self._owner is None:
            self._owner = me
        elif self._owner != me:
            raise StorageError("a StoreReader belongs to the thread that first followed a state")
        old, self._committed = self._committed, state
        if state.generation != old.generation:
            self.close()
            self.files = FileTable(self.directory, dict(state.files), self.config.max_open_files)
            self._init_reads()
            self.forget_written()
            return
        self.files.follow(state.files)
        if state.names_version != old.names_version:
            self._reindex_names()
            if self._recent is not None:
                self._recent.drop_before(self.meta("retained_from_hour", 0))
        if self._recent is not None and keep_written:
            self._recent.keep(state.written)

    def forget_written(self) -> None:
        """Forget every record kept from the states followed (recent_records.py)."""
        if self._recent is not None:
            self._recent.clear()

    def close(self) -> None:
        self._close_buckets()
        self.files.close_all()
