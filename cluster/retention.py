"""Retention: what the master proposes to cut, and what every consumer group has passed.

Delivered data older than the node's ``retention_ms`` goes, from the ready logs and then
from the hour files (and the keys of those hours with them). Only the master decides,
by its clock: it proposes a ``T`` entry naming the hour to cut before and, per topic, the
ready offset to trim below. Every node applies that same cut, clamped to what the
committed state allows at that entry, so no node ever cuts by its own clock and a stale
proposal can only cut less:

- a ready segment goes only once every consumer group of its topic has passed its end
  (a group counts once it has acknowledged something on the topic; the master also
  counts a retry topic's own group before that, so it never proposes to trim retries
  their group has not read yet);
- an hour goes only once it is sealed and no ready entry still held names it
  (``Transaction.drop_hours_before``), so a group never meets an entry whose message
  is gone.

:func:`plan` is what the master proposes; ``horologe storage inspect`` shows the same
plan's reclaimable bytes (:func:`.store_report.storage_report`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from horologe.storage.delay_index import MS_PER_HOUR
from horologe.storage.hour_names import hour_name
from horologe.storage.store_reads import StoreReads

from .committed_reads import GROUP_PREFIX, group_progress
from .consumer_groups import RETRY_PREFIX, GroupProgress


def groups_of(meta_keys: Iterable[str], topic: str) -> list[str]:
    """The consumer groups with progress on ``topic`` (meta ``group/<group>/<topic>``)."""
    out = []
    for key in meta_keys:
        if key.startswith(GROUP_PREFIX):
            group, _, of = key[len(GROUP_PREFIX) :].rpartition("/")
            if of == topic and group:
                out.append(group)
    return sorted(out)


def readers_of(meta_keys: Iterable[str], topic: str) -> list[str]:
    """The groups that read ``topic``: those with progress on it, and for a group's retry
    log the group it belongs to, progress or not (it reads its retries before it acked one)."""
    groups = set(groups_of(meta_keys, topic))
    if topic.startswith(RETRY_PREFIX):
        groups.add(topic[len(RETRY_PREFIX) :])
    return sorted(groups)


def passed_by_groups(
    meta_keys: Iterable[str],
    progress_of: Callable[[str], GroupProgress],
    topic: str,
    base: int,
    owner_reads: bool = False,
) -> int | None:
    """The offset every group of ``topic`` has passed (None: the topic has no group).
    ``owner_reads``: a retry topic counts the group it belongs to, progress or not (the
    master's plan; an entry's apply keeps the rule it always had, so that nodes of two
    releases cut alike).

    Offsets below the ready log's ``base`` are gone, so a group behind it counts as there."""
    groups = readers_of(meta_keys, topic) if owner_reads else groups_of(meta_keys, topic)
    passed = [max(progress_of(g).committed, base) for g in groups]
    return min(passed, default=None)


@dataclass(frozen=True)
class Cut:
    hour: int  # cut the hours before this one
    ready: dict[str, int] = field(default_factory=dict)  # topic -> trim the ready log below this offset

    def describe(self) -> str:
        trims = ", ".join(f"{t}<{o}" for t, o in sorted(self.ready.items())) or "no ready log"
        return f"hours before {hour_name(self.hour)}; {trims}"


def plan(reads: StoreReads, now_ms: int, retention_ms: int) -> Cut | None:
    """What data delivered more than ``retention_ms`` before ``now_ms`` can go now; None: nothing.

    A ready segment whose last entry was delivered before the limit and that every group
    has passed; the hours before the limit that are sealed and that no ready entry left
    after those trims names."""
    limit = now_ms - retention_ms
    meta_keys = reads.meta_keys()
    ready: dict[str, int] = {}
    floors: list[int] = []
    for topic in sorted(reads.topics()):
        log = reads.ready_log(topic)
        passed = passed_by_groups(
            meta_keys, lambda g, t=topic: group_progress(reads, g, t), topic, log.base, owner_reads=True
        )
        offset = log.base
        for _first, end, rel in log.segment_ranges():
            if offset == _first and (passed is None or end <= passed):
                last = int(reads.read_ready(topic, end - 1, end)["delivered_at_ms"][0])
                if last <= limit:
                    offset = end
                    continue
            floors.append(reads.ready_floor(rel))
        if offset > log.base:
            ready[topic] = offset
    hour = min(limit // MS_PER_HOUR, reads.sealed_before_hour, *floors)
    drops_hours = any(h < hour for h in reads.hours())
    if not ready and not drops_hours:
        return None
    return Cut(hour, ready)


@dataclass
class Reclaim:
    hours: int = 0
    hour_bytes: int = 0
    segments: int = 0
    ready_bytes: int = 0

    @property
    def total(self) -> int:
        return self.hour_bytes + self.ready_bytes


def reclaimable(reads: StoreReads, cut: Cut | None) -> Reclaim:
    """What applying ``cut`` would remove from disk (committed bytes)."""
    out = Reclaim()
    if cut is None:
        return out
    files = reads.file_lengths()
    for hour in reads.hours():
        if hour >= cut.hour:
            break
        out.hours += 1
        name = hour_name(hour)
        out.hour_bytes += sum(files.get(f"delay/{name}.{ext}", 0) for ext in ("log", "idx", "tomb"))
    for topic, offset in cut.ready.items():
        for _first, end, rel in reads.ready_log(topic).segment_ranges():
            if end <= offset:
                out.segments += 1
                out.ready_bytes += files[rel]
    return out
