"""A single-node stand-in for Raft in node-component tests: proposals apply at once.

``propose(kind, **fields)`` stamps the entry as the node does (the live watermark
given by ``ws``, the clock), applies it to a real StateMachine and makes the view
follow, as the tick thread and the crossing would; nothing is mocked below it.
"""

from __future__ import annotations

from collections.abc import Callable

from horologe.cluster import ApplyResult, Entry, EntryKind, StateMachine
from horologe.cluster.raft.node import Applied
from horologe.node.committed_view import CommittedView
from horologe.storage import Storage, StorageConfig
from horologe.storage.store_reader import StoreReader
from horologe.wheel import Watermark


class LocalLog:
    def __init__(self, directory: str, clock: Callable[[], int], config: StorageConfig | None = None) -> None:
        store = Storage(directory, config or StorageConfig(fsync=False))
        self.machine = StateMachine(store)
        self.view = CommittedView(StoreReader(store.directory, store.config, store.published()))
        self.clock = clock
        self.ws: Callable[[], Watermark] = lambda: self.view.ws  # the driver's, once it leads
        self.index = 0
        self.term: int | None = None  # the Raft term entries are applied in (None: not known)
        self.applied: list[ApplyResult] = []
        self.proposed: list[Entry] = []
        self.listeners: list[Callable[[ApplyResult], None]] = []

    async def propose(
        self, kind: EntryKind, clock_ms: int | None = None, ws: Watermark | None = None, **fields
    ) -> ApplyResult:
        """``ws``: the watermark the entry carries (the live one by default), for an entry
        stamped before it is applied."""
        now = self.clock() if clock_ms is None else clock_ms
        self.index += 1
        self.proposed.append(Entry(kind, self.ws() if ws is None else ws, now, **fields))
        res = self.machine.apply(self.index, self.proposed[-1].encode(), self.term)
        self.view.follow(Applied(res, self.machine.store.published(), self.machine.halted, 0))
        self.applied.append(res)
        for listener in self.listeners:
            listener(res)
        return res

    def publish(self) -> None:
        """Let the view follow what was written to the store directly."""
        self.view.follow(Applied(None, self.machine.store.published(), self.machine.halted, 0))

    def close(self) -> None:
        self.view.close()
        self.machine.store.close()
