"""The point a backup is taken at: the store's committed files, and the Raft entries they end at."""

from __future__ import annotations

from typing import NamedTuple

from horologe.cluster.leases import APPLIED_CLOCK
from horologe.storage import Storage

RaftEntry = tuple[bytes, int, int]  # (command, index, term), as pysyncobj keeps them


class BackupPoint(NamedTuple):
    folder: str  # the store's files, hard-linked (Storage.link_for_backup)
    checkpoint: dict  # the store's journal checkpoint: every file and its committed length
    store_index: int  # the last Raft index the store applied
    entries: tuple[RaftEntry, RaftEntry]  # (the entry before the last applied, the last applied)
    term: int  # the node's current term: a restored node starts there


def taken_at_ms(point: BackupPoint, wall_ms: int) -> int:
    """The time a backup of ``point`` holds everything acknowledged before: the cluster's
    clock at the last entry its store applied (an entry after it was proposed later, and
    acknowledged later still), or ``wall_ms`` if that is earlier. Not the time it was
    sent: a node that had not applied all that was committed at the point (a follower
    catching up) would date what it lacks before it."""
    applied = point.checkpoint["meta"].get(APPLIED_CLOCK)
    return wall_ms if applied is None else min(int(applied), wall_ms)


class NothingToBackUpError(Exception):
    """The node has not applied two Raft entries yet."""


def take_point(store: Storage, name: str, entry_at, last_applied: int, term: int) -> BackupPoint:
    """On the tick thread, between applies: link the store for a backup named ``name``.

    ``entry_at(i)`` is Raft entry ``i`` from the journal, which always holds the last
    applied one and the one before it (pysyncobj keeps the dump's last two).
    """
    if last_applied < 2:
        raise NothingToBackUpError(
            f"this node has applied {last_applied} Raft entries; nothing to back up yet"
        )
    entries = tuple((bytes(c), i, t) for c, i, t in (entry_at(last_applied - 1), entry_at(last_applied)))
    folder, record = store.link_for_backup(name)
    return BackupPoint(folder, record, store.applied_index, entries, term)
