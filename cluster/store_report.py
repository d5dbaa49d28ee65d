"""What ``horologe storage inspect`` shows of a store, reckoned here and only printed there.

The applied Raft index, the disk used under each top folder, what the master's next
retention cut would reclaim (:mod:`.retention`'s own plan), the key index's live and
dead entries, each topic's ready log and each hour's message count.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from horologe.storage import Storage
from horologe.storage.key_index import KEY_ENTRY

from .committed_reads import watermark
from .retention import Reclaim, plan, reclaimable


@dataclass(frozen=True)
class TopicLog:
    name: str
    topic_id: int
    base: int  # the first offset its ready log still holds
    count: int  # entries delivered, ever: the log's end offset


@dataclass(frozen=True)
class StorageReport:
    applied_index: int
    sealed_before_hour: int
    retained_from_hour: int  # 0: retention has removed nothing yet
    disk_used: dict[str, int]  # top folder -> bytes; "journal": the files at the store's root
    now_ms: int  # what retention was reckoned from
    reclaim: Reclaim  # what a retention cut at now_ms would remove
    live_keys: int
    dead_keys: int  # key-index entries from the cleaning cursor on that no live key needs
    dead_key_bytes: int
    topics: list[TopicLog]  # in topic id order
    hours: list[tuple[int, int]]  # (hour, messages in it), oldest first

    @property
    def disk_total(self) -> int:
        return sum(self.disk_used.values())


def disk_used(directory: str) -> dict[str, int]:
    """Bytes on disk under each top folder of a store (and its journal, the files at its root)."""
    used: dict[str, int] = {}
    for d, _, names in os.walk(directory):
        rel = os.path.relpath(d, directory)
        part = "journal" if rel == "." else rel.split(os.sep)[0]
        for n in names:
            used[part] = used.get(part, 0) + os.path.getsize(os.path.join(d, n))
    return used


def storage_report(store: Storage, now_ms: int | None, retention_ms: int) -> StorageReport:
    """``store`` summarised; retention is reckoned from ``now_ms``, or when None from the
    committed delivery watermark, as the master would by its clock."""
    now = watermark(store).ms if now_ms is None else now_ms
    keys = store.key_index
    dead = keys.end - keys.cursor - keys.live
    topics = sorted(store.topics().items(), key=lambda t: t[1])
    return StorageReport(
        applied_index=store.applied_index,
        sealed_before_hour=store.sealed_before_hour,
        retained_from_hour=store.meta("retained_from_hour", 0),
        disk_used=disk_used(store.directory),
        now_ms=now,
        reclaim=reclaimable(store, plan(store, now, retention_ms)),
        live_keys=keys.live,
        dead_keys=dead,
        dead_key_bytes=dead * KEY_ENTRY.size,
        topics=[TopicLog(name, tid, store.ready_base(name), store.ready_count(name)) for name, tid in topics],
        hours=[(hour, store.bucket(hour).count) for hour in store.hours()],
    )
