"""``check_store(store)``: verify every invariant of a store's committed state.

It reads everything, so it is for tests, tools and operators, not for hot paths.
The first broken invariant raises :class:`CorruptLogError` naming a file and offset.
It reads the store through its public reads only; the store does not know it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .delay_index import INDEX, slot_ms
from .errors import CorruptLogError, UnknownMessageError
from .framing import FRAME_OVERHEAD, committed_frames
from .heads import Heads
from .hour_names import parse_hour_name
from .key_heads import marks_of
from .key_index import CURSOR, CUTOFF, HOUR_COUNT, KEY_ENTRY, LIVE, key_hash
from .late_policies import DEAD_LETTERED, LATE
from .magic import DELAY_INDEX, DELAY_LOG, LATENESS, MAGIC_SIZE, MOVES, READY_LOG, check_magic
from .message import decode_record
from .message_id import MessageId
from .moves import COPY_OF, MOVE, MOVED_TO
from .ready_log import READY, base_key
from .store import Storage
from .tag_signature import tags_signature


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
    _check_late(store, bucket.late_rel, n)
    bucket.forget()  # reload tombstones from disk, verifying them
    report.cancelled += int(bucket.cancelled_mask().sum())
    report.messages += n
    report.hours += 1


def _check_ready(store: Storage, topic: str, report: CheckReport) -> None:
    log = store.ready_log(topic)
    if log is None or not log.segments:
        report.ready_entries[topic] = 0
        return
    tid = store.topic_id(topic)
    retained_from = store.meta("retained_from_hour", 0)
    at = log.base
    for first, end, rel in log.segment_ranges():
        f = store.files.get(rel)
        check_magic(f.read(0, MAGIC_SIZE), READY_LOG, f.path)
        if (f.length - MAGIC_SIZE) % READY.size:
            _fail(f.path, f.length, "ready log length is not a whole number of entries")
        if first != at or end == first:
            _fail(f.path, 0, f"segment starts at offset {first}; {at} was expected, with entries")
        rows = READY.read(f, 0, end - first, 0)
        hours = rows["hour"].astype(np.int64)
        if (hours < retained_from).any():
            k = int(np.argmax(hours < retained_from))
            _fail(f.path, READY.offset_of(k), f"ready entry {first + k} names an hour retention removed")
        floor = store.meta(f"ready_floor/{rel}")
        if floor is not None and floor != int(hours.min()):
            _fail(f.path, 0, f"segment floor says hour {floor}, its entries start at {int(hours.min())}")
        for k, (hour, gi) in enumerate(zip(hours.tolist(), rows["global_index"].tolist(), strict=True)):
            if gi >= store.bucket(hour).count:
                _fail(f.path, READY.offset_of(k), f"ready entry {first + k} names no message")
        at = end
    if store.meta(base_key(tid), 0) != log.base:
        _fail(store.files.path(log.segments[0][1]), 0, "ready base disagrees")
    report.ready_entries[topic] = at - log.base


def _check_keys(store: Storage, report: CheckReport) -> None:
    """Segments, crcs, chains and heads of the key index; live entries name their messages,
    and the live counts in meta are exact."""
    index = store.key_index
    log = index.log
    cursor, end, cutoff = index.cursor, index.end, index.cutoff()
    where = store.files.path(log.segments[0][1]) if log.segments else store.directory
    if not log.segments and cursor != end:
        _fail(where, 0, f"no key segments, but the cursor {cursor} is not the end {end}")
    at = None
    for first, seg_end, rel in log.segment_ranges():
        log.check_magic(rel)
        f = store.files.get(rel)
        if (f.length - MAGIC_SIZE) % KEY_ENTRY.size:
            _fail(f.path, f.length, "key segment length is not a whole number of entries")
        if (at is not None and first != at) or (at is None and first > cursor):
            _fail(f.path, 0, f"key segment starts at {first}, out of sequence")
        at = seg_end
    if cursor > end:
        _fail(where, 0, f"key cursor {cursor} is past the end {end}")
    rows = log.read(cursor, end) if end > cursor else np.empty(0, dtype=KEY_ENTRY.dtype)
    seqs = np.arange(cursor, end, dtype=np.int64)
    buckets = index.heads.buckets_of(rows["key_hash"])
    order = np.lexsort((seqs, buckets))
    b_sorted, s_sorted = buckets[order], seqs[order]
    first_of_bucket = np.ones(len(order), dtype=bool)
    first_of_bucket[1:] = b_sorted[1:] != b_sorted[:-1]
    want_pre = np.where(first_of_bucket, -1, np.concatenate([[-1], s_sorted[:-1]]))
    pre = rows["pre"][order]
    bad = np.where(first_of_bucket, pre >= cursor, pre != want_pre)
    if bad.any():
        n = int(s_sorted[np.argmax(bad)])
        _fail(where, 0, f"key entry {n} breaks its bucket's chain")
    # Heads: the newest entry of each bucket from the cursor on, and no other.
    last_of_bucket = np.ones(len(order), dtype=bool)
    last_of_bucket[:-1] = b_sorted[:-1] != b_sorted[1:]
    held = index.heads.heads
    in_range = np.flatnonzero(held > cursor)  # heads are entry numbers plus one
    if not (
        np.array_equal(in_range, b_sorted[last_of_bucket])
        and np.array_equal(held[in_range] - 1, s_sorted[last_of_bucket])
    ):
        _fail(index.heads_path, 0, "key heads do not match the index")
    # Marks: each entry's bit in its bucket's (bits of entries gone may stay).
    missed = (index.heads.marks[buckets] & marks_of(rows["key_hash"])) == 0
    if missed.any():
        _fail(index.heads_path, 0, f"key marks miss entry {cursor + int(np.argmax(missed))}")
    live = rows[rows["hour"] >= cutoff]
    counts: dict[int, int] = {}
    seen: dict[tuple[str, str], MessageId] = {}  # the id each key answers to
    for kh, hour, gi in zip(
        live["key_hash"].tolist(), live["hour"].tolist(), live["global_index"].tolist(), strict=True
    ):
        mid = MessageId(hour, gi)
        try:
            m = store.read_message(mid).message
        except UnknownMessageError:
            _fail(where, 0, f"live key entry names no message {mid}")
        if m.key is None or key_hash(m.topic, m.key) != kh:
            _fail(where, 0, f"key entry of {mid} does not hash its message's topic and key")
        # Live twice only for a rescheduled message: its original and its copies (moves);
        # an entry whose message moved to an hour gone past the cutoff answers nothing.
        answers = store.original_id(mid)
        answering = store.current_place(answers).hour >= cutoff
        if answering and seen.setdefault((m.topic, m.key), answers) != answers:
            _fail(where, 0, f"key {m.key!r} of {m.topic!r} is live for two messages")
        counts[hour] = counts.get(hour, 0) + 1
    held_counts = {
        int(k[len(HOUR_COUNT) :]): store.meta(k) for k in store.meta_keys() if k.startswith(HOUR_COUNT)
    }
    if store.applied_index and store.meta(CUTOFF, 0) != cutoff and held_counts:
        _fail(where, 0, f"key cutoff in meta {store.meta(CUTOFF, 0)} lags the cutoff {cutoff}")
    if held_counts != counts or store.meta(LIVE, 0) != len(live):
        _fail(where, 0, f"live key counts in meta disagree with the index: {held_counts} vs {counts}")
    if store.meta(CURSOR, 0) != cursor:
        _fail(where, 0, "key cursor disagrees")
    report.keys = len(live)


def _check_late(store: Storage, rel: str, n: int) -> None:
    """An hour's lateness file: magic, crcs, kinds, and messages it names."""
    f = store.files.get(rel)
    if f is None:
        return
    check_magic(f.read(0, MAGIC_SIZE), LATENESS, f.path)
    if (f.length - MAGIC_SIZE) % LATE.size:
        _fail(f.path, f.length, "lateness file length is not a whole number of entries")
    rows = LATE.read(f, 0, LATE.count_in(f.length), 0)
    bad = np.flatnonzero((rows["kind"] > DEAD_LETTERED) | (rows["global_index"] >= n))
    if len(bad):
        _fail(f.path, LATE.offset_of(int(bad[0])), f"lateness entry {int(bad[0])} has a bad kind or message")


def _check_moves(store: Storage, rel: str) -> None:
    """A reschedule file's magic and crcs; each message's last link leads to a copy that
    names it back, unless retention removed the copy's hour."""
    f = store.files.get(rel)
    check_magic(f.read(0, MAGIC_SIZE), MOVES, f.path)
    if (f.length - MAGIC_SIZE) % MOVE.size:
        _fail(f.path, f.length, "move file length is not a whole number of entries")
    rows = MOVE.read(f, 0, MOVE.count_in(f.length), 0)
    bad = np.flatnonzero((rows["kind"] != MOVED_TO) & (rows["kind"] != COPY_OF))
    if len(bad):
        _fail(f.path, MOVE.offset_of(int(bad[0])), f"move entry {int(bad[0])} has an unknown kind")
    hour = parse_hour_name(rel[len("delay/") : -len(".move")])
    bucket = store.bucket(hour)
    retained_from = store.meta("retained_from_hour", 0)
    for gi in np.unique(rows["global_index"]).tolist():
        copy = bucket.moved_to(gi)
        if copy is not None and copy.hour >= retained_from:
            if store.bucket(copy.hour).copy_of(copy.global_index) != MessageId(hour, gi):
                _fail(f.path, 0, f"{MessageId(hour, gi)} moved to {copy}, which does not name it back")
        if bucket.copy_of(gi) is not None and hour >= retained_from and gi >= bucket.count:
            _fail(f.path, 0, f"move entry names no message {MessageId(hour, gi)}")


def check_store(store: Storage, on_hour: Callable[[int], None] | None = None) -> CheckReport:
    """Verify every invariant of ``store``'s committed state; raises CorruptLogError on the
    first break. ``on_hour`` is called after each hour is verified (for progress displays)."""
    report = CheckReport()
    for hour in store.hours():
        _check_hour(store, hour, report)
        if on_hour is not None:
            on_hour(hour)
    for rel in sorted(r for r in store.file_lengths() if r.startswith("delay/") and r.endswith(".move")):
        _check_moves(store, rel)
    for topic in store.topics():
        _check_ready(store, topic, report)
    _check_keys(store, report)
    return report
