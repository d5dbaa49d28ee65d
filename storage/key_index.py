"""The key index: producer ``(topic, key)`` -> message id, on disk, for as long as the key lives.

It serves idempotent produce (a retried send returns the first id), cancel and
reschedule by key, and the pending list's look-up by key. Only the writer's thread reads
it: its chain heads live in the writer's memory and cleaning removes old segments, so a
node's event loop asks the writer (cluster/raft/writer_questions.py) rather than reading the
files beside it.

**Lifetime.** A key lives until ``key_window_ms`` (24 h, in whole hours) after the end
of its message's delivery hour, as the delivery watermark counts, or until retention
removes that hour. An entry is *live* while its hour is at or after the cutoff::

    max(retained_from_hour, sealed_before_hour - ceil(key_window_ms / 1 h))

Both come from the journal's meta and move only with applied entries, never with a
clock, so every node holds the same keys live at the same entry.

**Files.** A log-structured hash table in the style of the delay index. Entries are
appended in arrival order to a segmented log (segments) ``keys/index.<first>.kix``, each
segment the magic ``HZKIDX`` v1 then entries; the entries of each of ``key_buckets``
buckets form a reverse-linked chain whose heads are a rebuildable cache
(``keys/index.heads``, key_heads). Entry, 28 bytes, little-endian::

    key_hash      u64   xxh3_64 of msgpack [topic, key]; its low bits pick the bucket
    pre           i64   number of the previous entry of the same bucket, or -1
    hour          u32   the message id: its hour ...
    global_index  u32   ... and globalIndex
    crc           u32   crc32 of the 24 bytes above

**Look-up.** Hash, then walk the bucket's chain from its head, newest first, down to the
cleaning cursor, unless the bucket's marks (key_heads) say no entry of it has this
hash's bit; each entry read is checked against its crc. An entry whose hash matches
and that is live is checked against the message record itself (topic and key), so a
hash collision never answers a wrong id; it answers only while the hour its message
lives in now is live too (a message moved to an earlier hour leaves its first hour's
entry behind). A key is only added when no live entry answers it, or for a rescheduled
copy (moves), so that the key lives as long as the copy's hour: the entries live for one
key then all answer to one original id.

**Cleaning** bounds the disk. The cursor (meta ``keys/cursor``) only moves forward, and
entries below it are gone for look-ups. While the log from the cursor to its end holds
more than ``2 x live + key_clean_slack`` entries, each batch moves the cursor over twice
as many entries as it added keys (a retention entry over up to ``CLEAN_ON_TRIM`` more),
never over entries added in the same batch: dead entries are dropped, live ones appended
again at the end. Segments wholly below the cursor are removed. The live count is exact:
meta ``keys/hour/<hour>`` counts the live entries of each hour and ``keys/live`` their
sum; an hour's count leaves them once the cutoff (meta ``keys/cutoff``) passes it.

``pre`` names an entry below the cursor as -1, so the bytes written never depend on
whether a node's heads were rebuilt (a rebuild scans only from the cursor on). The
bucket count is kept in meta ``keys/buckets`` from the first key on.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import msgpack
import numpy as np
import xxhash

from .chain_links import chain_links
from .config import StorageConfig
from .delay_index import MS_PER_HOUR
from .errors import CorruptLogError, UnknownMessageError
from .file_table import FileTable
from .fixed_records import FixedLayout
from .key_heads import HEADS_NAME, KeyHeads
from .magic import KEY_INDEX
from .message import StoredMessage
from .message_id import MessageId
from .segments import SegmentedLog, list_segments, segment_rel

KEY_ENTRY = FixedLayout(
    struct.Struct("<QqII"),
    np.dtype(
        [
            ("key_hash", "<u8"),
            ("pre", "<i8"),
            ("hour", "<u4"),
            ("global_index", "<u4"),
            ("crc", "<u4"),
        ]
    ),
)
assert KEY_ENTRY.size == 28
_ENTRY_BODY = KEY_ENTRY.body.unpack_from

KEY_EXT = "kix"
KEY_STEM = "index"
CURSOR, LIVE, CUTOFF, BUCKETS = "keys/cursor", "keys/live", "keys/cutoff", "keys/buckets"
HOUR_COUNT = "keys/hour/"
CLEAN_RATIO = 2  # entries cleaned per key added, while the log is over its bound
CLEAN_ON_TRIM = 1 << 16  # entries a retention entry may clean besides
CLEAN_CHUNK = 1 << 16  # entries read at a time while cleaning


_packer = msgpack.Packer(use_bin_type=True)


def key_hash(topic: str, key: str) -> int:
    return key_hashes([(topic, key)])[0]


def key_hashes(keys: list[tuple[str, str]]) -> list[int]:
    """``key_hash`` of each ``(topic, key)``."""
    pack, digest = _packer.pack, xxhash.xxh3_64_intdigest
    return [digest(pack(k)) for k in keys]


def hour_count_key(hour: int) -> str:
    return f"{HOUR_COUNT}{hour}"


def key_segment_rel(first: int) -> str:
    return segment_rel("keys", KEY_STEM, first, KEY_EXT)


def window_hours(window_ms: int) -> int:
    return -(-window_ms // MS_PER_HOUR)


class OpenBatch(Protocol):
    """What the key index asks of the open batch (a ``Transaction``): the meta as the batch
    has left it so far, and the batch's meta writes."""

    def current_meta(self, key: str, default: Any = None) -> Any: ...

    def meta_keys(self) -> list[str]: ...

    def set_meta(self, key: str, value: Any) -> None: ...


class KeyIndex:
    """The key index of a store; only the writer adds and cleans, inside ``Storage.apply``,
    which hands each write the open batch (``tx``). A read given no batch reads the
    committed meta."""

    def __init__(
        self,
        files: FileTable,
        config: StorageConfig,
        committed_meta: Mapping[str, Any],
        read_message: Callable[[MessageId], StoredMessage],
        lives_in: Callable[[MessageId], int],
    ) -> None:
        """``committed_meta``: the store's committed meta (its journal's, kept up to date);
        ``read_message``: the store's, to check a hash's match against its message;
        ``lives_in``: the hour the message an entry names lives in now, however often
        it was rescheduled since (moves)."""
        self.files = files
        self.config = config
        self._committed_meta = committed_meta
        self._read_message = read_message
        self._lives_in = lives_in
        self.heads_path = files.path(HEADS_NAME)
        self._heads: KeyHeads | None = None
        self._heads_saved = -1  # ``covered`` of the heads file as last read or written
        self._undo: dict[int, int] = {}  # bucket -> head before the open batch
        self._batch_end: int | None = None  # where the log ended when the open batch began
        # Key-window files of the format before this index (``keys/<hour>.keys``): the
        # next batch removes them.
        committed = files.committed
        self.legacy = sorted(r for r in committed if r.startswith("keys/") and r.endswith(".keys"))
        self.reset()

    # -- state ----------------------------------------------------------------

    def reset(self) -> None:
        """Follow the committed files again (after open, commit or rollback)."""
        segs = list_segments(self.files.committed, "keys", KEY_EXT).get(KEY_STEM, [])
        self.log = SegmentedLog(self.files, KEY_ENTRY, KEY_INDEX, segs, self.cursor, key_segment_rel)

    def _meta(self, key: str, tx: OpenBatch | None, default: int = 0) -> int:
        """A meta value as the open batch ``tx`` has left it, or committed (``tx`` None)."""
        if tx is None:
            return self._committed_meta.get(key, default)
        return tx.current_meta(key, default)

    @property
    def cursor(self) -> int:
        return self._meta(CURSOR, None)

    @property
    def live(self) -> int:
        return self._meta(LIVE, None)

    @property
    def buckets(self) -> int:
        return self._buckets(None)

    def _buckets(self, tx: OpenBatch | None) -> int:
        return self._meta(BUCKETS, tx, self.config.key_buckets)

    @property
    def end(self) -> int:
        return self.log.end

    def cutoff(self, tx: OpenBatch | None = None) -> int:
        """Entries of hours before this one are dead."""
        back = self._meta("sealed_before_hour", tx) - window_hours(self.config.key_window_ms)
        return max(self._meta("retained_from_hour", tx), back)

    @property
    def heads(self) -> KeyHeads:
        """Heads covering every entry of the log, loaded or rebuilt on first use."""
        return self._heads_in(None)

    def _heads_in(self, tx: OpenBatch | None) -> KeyHeads:
        """:attr:`heads`, with the cursor as the open batch ``tx`` has left it."""
        h = self._heads
        end = self.end
        if h is None:
            buckets = self._buckets(tx)
            h = KeyHeads.load(self.heads_path, buckets)
            if h is None or h.covered > end:
                h = KeyHeads(buckets)
                h.covered = min(self._meta(CURSOR, tx), end)
            self._heads_saved = h.covered
            self._heads = h
        if h.covered < end:
            start = max(h.covered, self._meta(CURSOR, tx))
            for first in range(start, end, CLEAN_CHUNK):
                # No crc check here: a look-up checks every entry it reads.
                rows = self._read(first, min(end, first + CLEAN_CHUNK), verify=False)
                h.absorb(rows["key_hash"], first)
            h.covered = end
        return h

    def save_heads(self) -> None:
        h = self._heads
        if h is not None and h.covered == self.end and h.covered != self._heads_saved:
            h.save(self.heads_path)
            self._heads_saved = h.covered

    # -- reads ----------------------------------------------------------------

    def _read(self, start: int, stop: int, verify: bool = True) -> np.ndarray:
        if verify:
            for _, rel in self.log.overlapping(start, stop):
                self.log.check_magic(rel)
        return self.log.read(start, stop, None if verify else (lambda _rel, _lo, hi: hi))

    def _entry(self, n: int, firsts: list[int]) -> tuple[int, int, int, int]:
        k = bisect.bisect_right(firsts, n) - 1
        if k < 0:
            path = self.files.path(key_segment_rel(n))
            raise CorruptLogError(path, 0, f"no segment holds key entry {n}")
        first, rel = self.log.segments[k]
        f = self.files.get(rel)
        at = KEY_ENTRY.offset_of(n - first)
        raw = f.read(at, KEY_ENTRY.size)
        if len(raw) != KEY_ENTRY.size:
            raise CorruptLogError(f.path, at, f"key entry {n} lies past the segment's end")
        KEY_ENTRY.verify_entry(raw, f.path, at)
        return _ENTRY_BODY(raw)

    def lookup(self, topic: str, key: str, tx: OpenBatch | None = None) -> MessageId | None:
        """The id of the live message with this ``(topic, key)``, or None; as the open batch
        ``tx`` has left the index, when one is open."""
        return self.lookup_many([(topic, key)], None, tx)[0]

    def lookup_many(
        self, keys: list[tuple[str, str]], hashes: list[int] | None = None, tx: OpenBatch | None = None
    ) -> list[MessageId | None]:
        """:meth:`lookup` of each ``(topic, key)`` (whose ``key_hashes`` the caller may have)."""
        if not keys:
            return []
        if hashes is None:
            hashes = key_hashes(keys)
        heads = self._heads_in(tx)
        cursor, cutoff = self._meta(CURSOR, tx), self.cutoff(tx)
        firsts = [first for first, _ in self.log.segments]
        # Each chain's newest entry and its bucket's marks, for all at once: most keys asked
        # are new, their bucket empty, its chain older than the cursor, or its marks
        # without their bit, and need no look further.
        wanted = np.fromiter(hashes, np.uint64, len(hashes))
        buckets = heads.buckets_of(wanted)
        newest = heads.heads[buckets].astype(np.int64) - 1
        out: list[MessageId | None] = [None] * len(keys)
        for j in np.flatnonzero((newest >= cursor) & heads.may_hold(buckets, wanted)).tolist():
            (topic, key), h, n = keys[j], hashes[j], int(newest[j])
            found = None
            while n >= cursor:
                kh, pre, hour, gi = self._entry(n, firsts)
                if kh == h and hour >= cutoff:
                    mid = MessageId(hour, gi)
                    # A message moved to an earlier hour: its first hour's entry outlives it.
                    if self._names(mid, topic, key, n) and self._lives_in(mid) >= cutoff:
                        found = mid
                        break
                if pre >= n:
                    path = self.files.path(self.log.segments[-1][1])
                    raise CorruptLogError(path, 0, f"key entry {n} links forward to {pre}")
                n = pre
            out[j] = found
        return out

    def _names(self, mid: MessageId, topic: str, key: str, n: int) -> bool:
        try:
            m = self._read_message(mid).message
        except UnknownMessageError as e:
            path = self.files.path(self.log.segments[-1][1])
            raise CorruptLogError(path, 0, f"live key entry {n} names no message {mid}") from e
        return m.topic == topic and m.key == key

    # -- writes (inside Storage.apply) ----------------------------------------

    def _begin(self) -> None:
        if self._batch_end is None:
            self._batch_end = self.end

    def _append(self, tx: OpenBatch, hashes, hours, gis) -> None:
        """Append entries (their key hashes, hours and globalIndexes: sequences of one
        length), linking each into its bucket's chain in the order given."""
        self._begin()
        heads = self._heads_in(tx)
        cursor = self._meta(CURSOR, tx)
        first = self.end
        hashes = np.asarray(hashes, dtype=np.uint64)
        nums = np.arange(first, first + len(hashes), dtype=np.int64)
        buckets = heads.buckets_of(hashes)
        below = heads.heads[buckets] - 1  # each bucket's newest entry before the batch
        _, pre = chain_links(buckets, nums, np.where(below >= cursor, below, -1))
        opened, firsts = np.unique(buckets, return_index=True)
        for b, head in zip(opened.tolist(), (below[firsts] + 1).tolist(), strict=True):
            self._undo.setdefault(b, head)
        entries = np.zeros(len(hashes), dtype=KEY_ENTRY.dtype)
        entries["key_hash"] = hashes
        entries["pre"] = pre
        entries["hour"] = hours
        entries["global_index"] = gis
        self.log.append(KEY_ENTRY.seal(entries).tobytes(), self.config.key_segment_entries)
        heads.absorb(hashes, first)

    def add(self, tx: OpenBatch, keyed: list[tuple[str, str, MessageId]]) -> None:
        """Index new keys (none of them live already) in the open batch ``tx``; their hours
        count as live."""
        self.add_hashed(
            tx,
            key_hashes([(t, k) for t, k, _ in keyed]),
            np.array([mid.hour for _, _, mid in keyed], dtype=np.int64),
            np.array([mid.global_index for _, _, mid in keyed], dtype=np.int64),
        )

    def add_hashed(self, tx: OpenBatch, hashes: list[int], hours: np.ndarray, gis: np.ndarray) -> None:
        """:meth:`add` of keys by their ``key_hashes``, for messages ``hours``/``gis``."""
        if not len(hashes):
            return
        if tx.current_meta(BUCKETS) is None:
            tx.set_meta(BUCKETS, self._buckets(tx))
        self._append(tx, hashes, hours, gis)
        for hour, n in zip(*np.unique(hours, return_counts=True), strict=True):
            key = hour_count_key(int(hour))
            tx.set_meta(key, self._meta(key, tx) + int(n))
        tx.set_meta(LIVE, self._meta(LIVE, tx) + len(hashes))

    def settle(self, tx: OpenBatch, added: int, extra_clean: int) -> None:
        """End of the batch ``tx``: let the cutoff pass hours, then clean what the batch earned."""
        for rel in self.legacy:
            self.files.remove(rel)
        cutoff = self.cutoff(tx)
        if cutoff > self._meta(CUTOFF, tx):
            live = held = self._meta(LIVE, tx)
            for k in tx.meta_keys():
                if k.startswith(HOUR_COUNT) and int(k[len(HOUR_COUNT) :]) < cutoff:
                    live -= self._meta(k, tx)
                    tx.set_meta(k, None)
            tx.set_meta(CUTOFF, cutoff)
            if live != held:
                tx.set_meta(LIVE, live)
        self._clean(tx, CLEAN_RATIO * added + extra_clean, cutoff)

    def _clean(self, tx: OpenBatch, budget: int, cutoff: int) -> None:
        if budget <= 0 or not self.log.segments:
            return
        self._begin()
        # The heads take in the log from the committed cursor before this batch moves it:
        # read after, they would skip the entries between the two cursors, which are
        # live again should the batch roll back.
        self._heads_in(tx)
        slack = self.config.key_clean_slack
        while budget > 0 and self.end - self._meta(CURSOR, tx) > 2 * self._meta(LIVE, tx) + slack:
            cursor = self._meta(CURSOR, tx)
            n = min(budget, CLEAN_CHUNK, self._batch_end - cursor)
            if n <= 0:
                break
            rows = self._read(cursor, cursor + n)
            tx.set_meta(CURSOR, cursor + n)  # first: copies must not link below it
            keep = rows[rows["hour"] >= cutoff]
            if len(keep):
                self._append(tx, keep["key_hash"], keep["hour"], keep["global_index"])
            budget -= n
            self._drop_below(cursor + n)

    def _drop_below(self, cursor: int) -> None:
        """Remove the segments wholly below ``cursor`` (the end stays known: it is the cursor)."""
        segs = self.log.segments
        while segs:
            first, rel = segs[0]
            if first + self.log.entries_in(rel) > cursor:
                break
            self.files.remove(rel)
            segs.pop(0)
        self.log.base = cursor

    def commit(self) -> None:
        """The batch committed: the segments in memory are the committed ones now."""
        self._undo.clear()
        self._batch_end = None
        self.log.base = self.cursor
        self.legacy = []
        if self._heads is not None:
            self._heads.roll(self.cursor, self.end)

    def rollback(self) -> None:
        h = self._heads
        if h is not None:
            for b, head in self._undo.items():
                h.heads[b] = head
        self._undo.clear()
        self._batch_end = None
        self.reset()
        if h is not None:
            h.covered = min(h.covered, self.end)
