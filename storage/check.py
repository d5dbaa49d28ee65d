"""``Storage.check()``: verify every invariant of a store's committed state.

It reads everything, so it is for tests, tools and operators, not for hot paths.
The first broken invariant raises :class:`CorruptLogError` naming a file and offset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgpack
import numpy as np

from .delay_index import INDEX, slot_ms
from .errors import CorruptLogError
from .framing import FRAME_OVERHEAD, committed_frames
from .heads import Heads
from .key_window import key_file
from .magic import DELAY_INDEX, DELAY_LOG, KEY_LOG, MAGIC_SIZE, READY_LOG, check_magic
from .message import decode_record
from .message_id import MessageId
from .ready_log import READY
from .tag_signature import tags_signature

if TYPE_CHECKING:  # hints only: store imports this module, and imports stay acyclic
    from .store import Storage


@dataclass
class CheckReport:
    hours: int = 0
    messages: int = 0
    cancelled: int = 0
    ready_entries: dict[str, int] = field(default_factory=dict)
    keys: int = 0


def _fail(path: str, offset: int, reason: str) -> None:
    raise CorruptLogError(path, offset, reason)


def _check_hour(store: Storage, hour: int, report: CheckReport) -> None:
    bucket = store.bucket(hour)
    log = store.files.get(bucket.log_rel)
    idx = store.files.get(bucket.idx_rel)
    if log is None or idx is None:
        _fail(store.files.path(bucket.idx_rel), 0, "hour has an index but no log, or the reverse")
    if (idx.length - MAGIC_SIZE) % INDEX.size:
        _fail(idx.path, idx.length, "index length is not a whole number of entries")
    log_buf = log.buffer()
    check_magic(bytes(log_buf[:MAGIC_SIZE]), DELAY_LOG, log.path)
    idx_buf = idx.buffer()
    check_magic(bytes(idx_buf[:MAGIC_SIZE]), DELAY_INDEX, idx.path)
    n = INDEX.count_in(idx.length)
    INDEX.verify(idx_buf, 0, n, idx.path)
    view = INDEX.view(idx_buf, n)
    topics = {tid: name for name, tid in store.topics().items()}
    gi = 0
    for offset, payload in committed_frames(log_buf, MAGIC_SIZE, log.path):
        if gi >= n:
            _fail(log.path, offset, "log holds a record the index does not")
        e = view[gi]
        at = INDEX.offset_of(gi)
        if int(e["offset"]) != offset or int(e["size"]) != len(payload) + FRAME_OVERHEAD:
            _fail(idx.path, at, f"entry {gi} does not point at record {gi}")
        stored = decode_record(payload, log.path, offset)
        msg = stored.message
        if stored.id != MessageId(hour, gi):
            _fail(log.path, offset, f"record says {stored.id}, it sits at {MessageId(hour, gi)}")
        slot = int(slot_ms(hour, e))
        if int(e["second_of_hour"]) >= 3600 or int(e["ms"]) >= 1000 or msg.deliver_at_ms > slot:
            _fail(idx.path, at, f"entry {gi} is filed at {slot}, before deliver_at {msg.deliver_at_ms}")
        if int(e["tag_sig"]) != tags_signature(msg.tags):
            _fail(idx.path, at, f"entry {gi} tag signature does not match its tags")
        if topics.get(int(e["topic_id"])) != msg.topic:
            _fail(idx.path, at, f"entry {gi} topic id does not name {msg.topic!r}")
        gi += 1
    if gi != n:
        _fail(idx.path, INDEX.offset_of(gi), f"index has {n} entries, log {gi} records")
    # Chains: within each second, localIndex counts 0.. in arrival order and
    # pre_global_index names the previous entry of the same second.
    secs = view["second_of_hour"].astype(np.int64)
    order = np.lexsort((np.arange(n), secs))
    s_sorted = secs[order]
    first_of_sec = np.ones(n, dtype=bool)
    first_of_sec[1:] = s_sorted[1:] != s_sorted[:-1]
    group_start = np.maximum.accumulate(np.where(first_of_sec, np.arange(n), 0))
    want_li = np.arange(n) - group_start
    want_pre = np.where(first_of_sec, -1, np.concatenate([[-1], order[:-1]]))
    bad = (view["local_index"][order] != want_li) | (view["pre_global_index"][order] != want_pre)
    if bad.any():
        g = int(order[np.argmax(bad)])
        _fail(idx.path, INDEX.offset_of(g), f"entry {g} breaks its second's chain")
    rebuilt = Heads()
    rebuilt.absorb(view, 0)
    heads = bucket.heads
    if not (np.array_equal(heads.last, rebuilt.last) and np.array_equal(heads.count, rebuilt.count)):
        _fail(bucket.heads_path, 0, "heads do not match the index")
    saved = Heads.load(bucket.heads_path)
    if (
        saved is not None
        and saved.covered == n
        and not (np.array_equal(saved.last, rebuilt.last) and np.array_equal(saved.count, rebuilt.count))
    ):
        _fail(bucket.heads_path, 0, "heads file claims to cover the index but disagrees with it")
    bucket.forget()  # reload tombstones from disk, verifying them
    report.cancelled += int(bucket.cancelled_mask().sum())
    report.messages += n
    report.hours += 1


def _check_ready(store: Storage, topic: str, report: CheckReport) -> None:
    f = store.ready_file(topic)
    if f is None:
        return
    entries = store.read_ready(topic)
    check_magic(bytes(f.buffer()[:MAGIC_SIZE]), READY_LOG, f.path)
    if (f.length - MAGIC_SIZE) % READY.size:
        _fail(f.path, f.length, "ready log length is not a whole number of entries")
    retained_from = store.meta("retained_from_hour", 0)
    for k, e in enumerate(entries):
        hour, gi = int(e["hour"]), int(e["global_index"])
        if hour < retained_from:
            continue
        if gi >= store.bucket(hour).count:
            _fail(f.path, READY.offset_of(k), f"ready entry {k} names no message")
    report.ready_entries[topic] = len(entries)


def check_store(store: Storage, on_hour: Callable[[int], None] | None = None) -> CheckReport:
    report = CheckReport()
    for hour in store.hours():
        _check_hour(store, hour, report)
        if on_hour is not None:
            on_hour(hour)
    for topic in store.topics():
        _check_ready(store, topic, report)
    for hour in store.key_file_hours():
        f = store.files.get(key_file(hour))
        buf = f.buffer()
        check_magic(bytes(buf[:MAGIC_SIZE]), KEY_LOG, f.path)
        for offset, payload in committed_frames(buf, MAGIC_SIZE, f.path):
            try:
                topic, key, mid, produced_at = msgpack.unpackb(payload, raw=False)
                MessageId.parse(mid)
            except (ValueError, TypeError, msgpack.UnpackException) as e:
                raise CorruptLogError(f.path, offset, f"undecodable key record: {e}") from e
            report.keys += 1
    return report
