"""The backups this node sends (``GET /admin/backup``, cluster/backup/), one at a time."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable

from horologe.cluster.backup.stream import backup_chunks
from horologe.cluster.raft.backup_point import BackupPoint, NothingToBackUpError, taken_at_ms

from .errors import BackupInProgress, BackupNotCurrent, Halted, NothingToBackUp


class Backups:
    def __init__(
        self,
        node_id: str,
        take: Callable[[str], Awaitable[BackupPoint]],
        wall_ms: Callable[[], int],
        halted: Callable[[], str | None],
        behind: Callable[[], str | None] = lambda: None,
    ) -> None:
        """``take(name)`` links the store for a backup (``RaftNode.take_backup``); ``wall_ms``
        is this node's clock; ``halted()`` says why the node stopped applying, if it did;
        ``behind()`` why its copy may be behind the cluster's, if it may."""
        self._node_id = node_id
        self._take = take
        self._wall_ms = wall_ms
        self._halted = halted
        self._behind = behind
        self._busy = False

    @contextlib.asynccontextmanager
    async def open(
        self, allow_stale: bool = False
    ) -> AsyncIterator[tuple[BackupPoint, AsyncIterator[bytes]]]:
        """The point a new backup is taken at, and its tar's chunks; the linked copy is
        removed when the block ends, however it ends. Refused when the node's copy may be
        behind the cluster's, unless ``allow_stale``."""
        if self._busy:
            raise BackupInProgress("a backup of this node is being sent; ask again when it ends")
        why = self._halted()
        if why:
            raise Halted(f"this node stopped applying, so it has no state to back up: {why}")
        behind = None if allow_stale else self._behind()
        if behind:
            raise BackupNotCurrent(
                f"this node's copy may be behind what the cluster committed: {behind}. Back up a "
                "node whose /readyz answers 200, or allow a stale copy (horologe backup --allow-stale, "
                "?allow_stale=true)"
            )
        self._busy = True
        try:
            try:
                point = await self._take(secrets.token_hex(8))
            except NothingToBackUpError as e:
                raise NothingToBackUp(str(e)) from e
            try:
                yield point, self._chunks(point)
            finally:
                await asyncio.to_thread(shutil.rmtree, point.folder, True)
        finally:
            self._busy = False

    async def _chunks(self, point: BackupPoint) -> AsyncIterator[bytes]:
        chunks = backup_chunks(point, self._node_id, taken_at_ms(point, self._wall_ms()))
        while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
            yield chunk
