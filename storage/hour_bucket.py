"""One delivery hour: its delay log, delay index, tombstones and cached heads.

Files, named by the UTC hour ``YYYYMMDDHH`` under ``delay/``::

    <hour>.log    magic HZDLOG v1, then one frame per message (framing, message)
    <hour>.idx    magic HZDIDX v1, then 40-byte entries (delay_index)
    <hour>.tomb   magic HZTOMB v1, then 8-byte cancel entries (tombstones)
    <hour>.move   magic HZMOVE v1, then 20-byte reschedule entries (moves)
    <hour>.late   magic HZLATE v1, then 20-byte lateness entries (late_policies)
    <hour>.heads  per-second chain heads, a rebuildable cache (heads)

Appends are O(1) per message whatever its second: the message becomes the new head
of its second's reverse-linked list. Reading a second walks that list from its head,
or, for a long one, finds its entries in the index span it lies in and checks their links.
"""

from __future__ import annotations

import os

import numpy as np

from .chain_links import chain_links
from .delay_index import INDEX, MS_PER_HOUR, SECONDS_PER_HOUR, slot_ms
from .errors import CorruptLogError, UnknownMessageError
from .file_table import FileTable
from .framing import FRAME_HEAD, FRAME_OVERHEAD, frame, read_frame, read_frames
from .heads import Heads
from .hour_names import hour_name
from .late_policies import DEAD_LETTERED, DLQ_AFTER, DROP_AFTER, DROPPED, LATE
from .magic import DELAY_INDEX, DELAY_LOG, LATENESS, MAGIC_SIZE, MOVES, TOMBSTONES, check_magic
from .message import StoredMessage, decode_record, encode_records, record_names, records_name
from .message_columns import MessageColumns
from .message_id import MessageId, id_strings
from .moves import COPY_OF, MOVE, MOVED_TO
from .side_entries import SideEntries
from .tombstones import TOMBSTONE

DENSE_FACTOR = 4  # read a span at once when it is at most this many times what is asked for
# Find a second's chain by scanning the index span it lies in when the span is at most this
# many times its length: a link walked costs about 1 µs, an entry scanned a few ns.
SCAN_FACTOR = 64
SCAN_MIN = 64  # and when it has at least this many: below, the scan's set-up costs more


class HourBucket:
    def __init__(self, files: FileTable, hour: int) -> None:
        self.files = files
        self.hour = hour
        name = hour_name(hour)
        self.log_rel = f"delay/{name}.log"
        self.idx_rel = f"delay/{name}.idx"
        self.tomb_rel = f"delay/{name}.tomb"
        self.move_rel = f"delay/{name}.move"
        self.heads_path = files.path(f"delay/{name}.heads")
        self._heads: Heads | None = None
        self._heads_saved = -1  # the ``covered`` of the heads file as last read or written
        self._cancelled: np.ndarray | None = None
        self._tombs_read = 0  # tombstones folded into ``_cancelled``
        self._moves: tuple[dict[int, MessageId], dict[int, MessageId]] | None = None  # to, copy of
        self._move_entries = SideEntries(files, self.move_rel, MOVE, MOVES)
        self._late: tuple[dict[int, tuple[int, int]], dict[int, tuple[int, int]]] | None = None
        self.late_rel = f"delay/{name}.late"
        self._late_entries = SideEntries(files, self.late_rel, LATE, LATENESS)
        self._verified = 0  # index entries whose crc this process has checked
        self._mapped = False

    # -- sizes and views ------------------------------------------------------

    @property
    def count(self) -> int:
        f = self.files.get(self.idx_rel)
        return 0 if f is None else INDEX.count_in(f.length)

    @property
    def start_ms(self) -> int:
        return self.hour * MS_PER_HOUR

    def set_mapped(self, mapped: bool) -> None:
        """Use mmap for this hour's reads: only the current and next delivery hours."""
        self._mapped = mapped
        for rel in (self.log_rel, self.idx_rel):
            f = self.files.get(rel)
            if f is not None:
                f.set_mapped(mapped)

    def index_view(self) -> np.ndarray:
        """All index entries as a numpy structured array, checksums verified once."""
        f = self.files.get(self.idx_rel)
        if f is None:
            return np.empty(0, dtype=INDEX.dtype)
        f.set_mapped(self._mapped)
        buf = f.buffer()
        check_magic(bytes(buf[:MAGIC_SIZE]), DELAY_INDEX, f.path)
        n = INDEX.count_in(f.length)
        if self._verified < n:
            INDEX.verify(buf, self._verified, n, f.path)
            self._verified = n
        return INDEX.view(buf, n)

    def entry(self, gi: int) -> np.void:
        if not 0 <= gi < self.count:
            raise UnknownMessageError(f"no message {MessageId(self.hour, gi)}")
        f = self.files.get(self.idx_rel)
        raw = f.read(INDEX.offset_of(gi), INDEX.size)
        if gi >= self._verified:
            INDEX.verify_entry(raw, f.path, INDEX.offset_of(gi))
        return np.frombuffer(raw, dtype=INDEX.dtype)[0]

    def entries(self, gis: list[int]) -> np.ndarray:
        """Index entries ``gis`` (each below :attr:`count`), in that order: one read of
        their span when they lie close together, else one read each."""
        if len(gis) >= 2:
            lo, hi = min(gis), max(gis)
            if hi - lo < DENSE_FACTOR * len(gis):
                return self._index_range(lo, hi + 1)[np.asarray(gis, dtype=np.int64) - lo]
        return np.array([self.entry(gi) for gi in gis], dtype=INDEX.dtype)

    # -- heads ----------------------------------------------------------------

    @property
    def heads(self) -> Heads:
        """Chain heads covering every committed entry; a reader's catch up on what was appended."""
        n = self.count
        h = self._heads
        if h is None:
            h = Heads.load(self.heads_path)
            if h is None or h.covered > n:
                h = Heads()
            self._heads_saved = h.covered
            self._heads = h
        if h.covered < n:
            h.absorb(self._index_range(h.covered, n), h.covered)
        return h

    def _index_range(self, first: int, stop: int) -> np.ndarray:
        """Index entries ``first .. stop-1``: a slice of the map when mapped, else only they
        are read (a reader catching up must not reread a whole hour)."""
        if self._mapped or first == 0:
            return self.index_view()[first:stop]
        f = self.files.get(self.idx_rel)
        rows = INDEX.read(f, first, stop, self._verified)
        self._verified = max(self._verified, stop)
        return rows

    def save_heads(self) -> None:
        """Write the heads cache file if it lags what is in memory."""
        h = self._heads
        if h is not None and h.covered == self.count and h.covered != self._heads_saved:
            h.save(self.heads_path)
            self._heads_saved = h.covered

    def forget(self) -> None:
        """Drop in-memory caches, e.g. after a rolled-back batch cut the files."""
        self._heads = None
        self._cancelled = None
        self._moves = None
        self._late = None
        self._verified = min(self._verified, self.count)

    # -- appends --------------------------------------------------------------

    def append(
        self,
        cols: MessageColumns,
        at: np.ndarray,
        slots: np.ndarray,
        topic_ids: np.ndarray,
        tag_sigs: np.ndarray,
    ) -> tuple[np.ndarray, list[bytes]]:
        """Append the messages at positions ``at`` of ``cols``, filed at ``slots`` (epoch ms
        in this hour), under ``topic_ids`` with ``tag_sigs`` (one per position); return their
        globalIndexes and their records. Each becomes the head of its second's chain, in the
        order given."""
        heads = self.heads
        log = self.files.writable(self.log_rel, DELAY_LOG)
        idx = self.files.writable(self.idx_rel, DELAY_INDEX)
        first = INDEX.count_in(idx.length)
        assert heads.covered == first, (heads.covered, first)
        n = len(at)
        gis = np.arange(first, first + n, dtype=np.int64)
        rel = slots - self.start_ms
        secs = rel // 1000
        assert n == 0 or (secs.min() >= 0 and secs.max() < SECONDS_PER_HOUR), (slots, self.hour)
        whole = n == len(cols) and np.array_equal(at, np.arange(n))  # the batch's one hour, as a rule
        pos = range(n) if whole else at.tolist()
        recs = encode_records(
            id_strings(self.hour, gis),
            cols.topics if whole else [cols.topics[i] for i in pos],
            [cols.tags.get(i, ()) for i in pos] if cols.tags else [()] * n,  # packed as arrays
            cols.bodies if whole else [cols.bodies[i] for i in pos],
            (cols.deliver_at_ms if whole else cols.deliver_at_ms[at]).tolist(),
            cols.keys if whole else [cols.keys[i] for i in pos],
            [cols.headers.get(i, {}) for i in pos] if cols.headers else [{}] * n,
            [cols.attempts.get(i, 0) for i in pos] if cols.attempts else [0] * n,
            (cols.produced_at_ms if whole else cols.produced_at_ms[at]).tolist(),
        )
        frames = [frame(rec) for rec in recs]
        sizes = np.fromiter(map(len, frames), dtype=np.int64, count=n)
        entries = np.zeros(n, dtype=INDEX.dtype)
        entries["offset"] = log.length + np.cumsum(sizes) - sizes
        entries["size"] = sizes
        rank, entries["pre_global_index"] = chain_links(secs, gis, heads.last[secs])
        entries["local_index"] = heads.count[secs] + rank
        entries["second_of_hour"] = secs
        entries["ms"] = rel % 1000
        entries["tag_sig"] = tag_sigs
        entries["topic_id"] = topic_ids
        log.append(b"".join(frames))
        idx.append(INDEX.seal(entries).tobytes())
        heads.absorb(entries, first)
        if self._verified == first:
            self._verified = heads.covered
        return gis, recs

    # -- reads ----------------------------------------------------------------

    def chain(self, sec: int, from_local_index: int = 0, prev_gi: int = -1) -> np.ndarray:
        """GlobalIndexes of second ``sec`` in arrival (localIndex) order.

        With ``from_local_index`` only the messages from that ordinal on, and
        ``prev_gi`` the globalIndex of localIndex ``from_local_index - 1`` when the
        caller knows it: catching up on new arrivals costs O(new).

        A chain short next to the index span it lies in (from the start of the hour, or
        from ``prev_gi``) is walked link by link from its head. A longer one is read by
        scanning that span for the second's entries and checking every link of them at
        once: a hot second's 100,000 links take a tenth of a second to walk, a few
        milliseconds this way.
        """
        n = int(self.heads.count[sec])
        want = n - from_local_index
        if want <= 0:
            return np.empty(0, dtype=np.int64)
        view = self.index_view()
        last = int(self.heads.last[sec])
        lo = prev_gi + 1 if from_local_index and prev_gi >= 0 else 0
        if want < SCAN_MIN or last - lo >= SCAN_FACTOR * want or not 0 <= last < len(view):
            return self._walk(view, sec, n, from_local_index, last)
        return self._scan(view, sec, n, from_local_index, lo, last)

    def _walk(self, view: np.ndarray, sec: int, n: int, from_local_index: int, last: int) -> np.ndarray:
        out = np.empty(n - from_local_index, dtype=np.int64)
        pre = view["pre_global_index"]
        secs = view["second_of_hour"]
        lis = view["local_index"]
        gi = last
        for li in range(n - 1, from_local_index - 1, -1):
            if gi < 0 or gi >= len(view) or secs[gi] != sec or lis[gi] != li:
                raise self._broken(sec, li, gi)
            out[li - from_local_index] = gi
            gi = int(pre[gi])
        if from_local_index == 0 and gi != -1:
            raise CorruptLogError(
                self.files.path(self.idx_rel),
                INDEX.offset_of(int(out[0])),
                f"chain of second {sec} runs past localIndex 0",
            )
        return out

    def _scan(
        self, view: np.ndarray, sec: int, n: int, from_local_index: int, lo: int, last: int
    ) -> np.ndarray:
        """The chain as :meth:`_walk` finds it, from the index entries ``lo..last`` of
        ``sec``: appended in arrival order, the last of them the head, each must carry
        the next localIndex and link to the one before it (the first to ``lo - 1``, or
        to nothing).

        Anything else is walked instead. From a hint (``lo`` > 0) that was not right, the
        walk stands. From the start, the whole chain is walked, to report where it
        breaks; a chain that walks soundly is corrupt all the same if other entries claim
        its second, or if its links run out of arrival order."""
        gis = lo + np.flatnonzero(view["second_of_hour"][lo : last + 1] == sec)
        first = from_local_index if lo else 0
        if len(gis) == n - first and gis[-1] == last:
            links = np.empty(len(gis), dtype=np.int64)  # each entry's, if the chain is sound
            links[0] = lo - 1 if lo else -1
            links[1:] = gis[:-1]
            if np.array_equal(view["local_index"][gis], np.arange(first, n)) and np.array_equal(
                view["pre_global_index"][gis], links
            ):
                return gis[from_local_index - first :].astype(np.int64, copy=False)
        if lo:
            return self._walk(view, sec, n, from_local_index, last)
        whole = self._walk(view, sec, n, 0, last)
        stray = np.setdiff1d(gis, whole)
        if len(stray):
            at, why = int(stray[0]), "lie off its chain"
        else:
            back = np.flatnonzero(np.diff(whole) <= 0)
            at, why = (int(whole[back[0] + 1]) if len(back) else last), "run out of arrival order"
        raise CorruptLogError(
            self.files.path(self.idx_rel), INDEX.offset_of(at), f"index entries of second {sec} {why}"
        )

    def _broken(self, sec: int, li: int, gi: int) -> CorruptLogError:
        return CorruptLogError(
            self.files.path(self.idx_rel),
            INDEX.offset_of(max(gi, 0)),
            f"chain of second {sec} broken at localIndex {li}",
        )

    def read_message(self, gi: int) -> StoredMessage:
        (payload, at), log = self._record(gi), self.files.path(self.log_rel)
        return decode_record(payload, log, at, MessageId(self.hour, gi))

    def read_messages(self, gis: list[int]) -> list[StoredMessage]:
        """Messages ``gis`` (in that order), read as :meth:`read_records` reads them."""
        log = self.files.path(self.log_rel)
        payloads, ats, _named = self._records(gis)
        return [
            decode_record(payload, log, at, MessageId(self.hour, gi))
            for gi, payload, at in zip(gis, payloads, ats, strict=True)
        ]

    def read_records(self, gis: list[int]) -> list[bytes | memoryview]:
        """The delay-log records (msgpack, see message) of ``gis``, in that order, each
        checked: its frame's crc, and that it is the message the index names. For handing
        records on without decoding them (a pull); :meth:`read_messages` decodes."""
        payloads, ats, named = self._records(gis)
        for k in np.flatnonzero(~named).tolist():  # written another way: check it whole
            decode_record(payloads[k], self.files.path(self.log_rel), ats[k], MessageId(self.hour, gis[k]))
        return payloads

    def _record(self, gi: int) -> tuple[bytes, int]:
        """(payload, log offset) of message ``gi``'s frame, its crc checked."""
        e = self.entry(gi)
        log = self.files.get(self.log_rel)
        offset, size = int(e["offset"]), int(e["size"])
        if offset + size > log.length:
            raise CorruptLogError(log.path, offset, "index points past the log's end")
        return read_frame(log.read(offset, size), 0, log.path), offset

    def _records(self, gis: list[int]) -> tuple[list, list[int], np.ndarray]:
        """Payloads of ``gis``'s frames (crc checked), their log offsets, and whether each
        is, by its leading id, the message asked for (message.records_name). With one
        read of their index entries and one of their frames, all checked at once, when
        they lie close together, as a hot second's do; else one by one."""
        if len(gis) >= 2:
            lo, hi = min(gis), max(gis)
            if lo < 0 or hi >= self.count:
                raise UnknownMessageError(f"no message {MessageId(self.hour, lo if lo < 0 else hi)}")
            if hi - lo < DENSE_FACTOR * len(gis):
                got = self._dense_records(gis, lo, hi)
                if got is not None:
                    return got
        pairs = [self._record(gi) for gi in gis]
        named = [record_names(p, MessageId(self.hour, gi)) for gi, (p, _) in zip(gis, pairs, strict=True)]
        return [p for p, _ in pairs], [at for _, at in pairs], np.array(named, dtype=bool)

    def _dense_records(self, gis: list[int], lo: int, hi: int) -> tuple[list, list[int], np.ndarray] | None:
        f = self.files.get(self.idx_rel)
        raw = f.read(INDEX.offset_of(lo), (hi - lo + 1) * INDEX.size)
        checked = max(lo, self._verified)
        INDEX.verify_run(raw, (checked - lo) * INDEX.size, hi + 1 - checked, f.path, INDEX.offset_of(checked))
        if lo <= self._verified:  # checked up to hi now, with no gap
            self._verified = max(self._verified, hi + 1)
        want = np.asarray(gis, dtype=np.int64)
        rows = np.frombuffer(raw, dtype=INDEX.dtype)[want - lo]
        starts = rows["offset"].astype(np.int64)
        sizes = rows["size"].astype(np.int64)
        start, end = int(starts.min()), int((starts + sizes).max())
        log = self.files.get(self.log_rel)
        if end > log.length:
            raise CorruptLogError(log.path, end, "index points past the log's end")
        if end - start > DENSE_FACTOR * int(sizes.sum()):
            return None
        span = log.read(start, end - start)
        payloads = read_frames(span, starts - start, sizes, log.path, start)
        firsts = starts - start + FRAME_HEAD.size
        named = records_name(
            np.frombuffer(span, dtype=np.uint8), firsts, sizes - FRAME_OVERHEAD, self.hour, want
        )
        return payloads, starts.tolist(), named

    # -- tombstones -----------------------------------------------------------

    def cancelled_mask(self) -> np.ndarray:
        """A bitmap (bool per globalIndex) of cancelled messages, tombstones read incrementally."""
        n = self.count
        mask = self._cancelled
        if mask is None:
            mask = self._cancelled = np.zeros(n, dtype=bool)
            self._tombs_read = 0
        elif len(mask) < n:
            mask = self._cancelled = np.concatenate([mask, np.zeros(n - len(mask), bool)])
        gis, k = self._tombstones_from(self._tombs_read, n)
        mask[gis] = True
        self._tombs_read = k
        return mask

    def _tombstones_from(self, first: int, n: int) -> tuple[np.ndarray, int]:
        """GlobalIndexes the tombstones from number ``first`` on name (checked against the
        ``n`` messages), and how many tombstones the file holds."""
        f = self.files.get(self.tomb_rel)
        k = 0 if f is None else TOMBSTONE.count_in(f.length)
        if k <= first:
            return np.empty(0, dtype=np.int64), k
        buf = f.buffer()
        if first == 0:
            check_magic(bytes(buf[:MAGIC_SIZE]), TOMBSTONES, f.path)
        TOMBSTONE.verify(buf, first, k, f.path)
        gis = TOMBSTONE.view(buf, k)["global_index"][first:].astype(np.int64)
        if len(gis) and gis.max() >= n:
            raise CorruptLogError(f.path, MAGIC_SIZE, "tombstone names no message")
        return gis, k

    # -- reschedules ------------------------------------------------------------

    def _read_moves(self) -> tuple[dict[int, MessageId], dict[int, MessageId]]:
        """(moved to, copy of) by globalIndex, the move entries read incrementally."""
        if self._moves is None:
            self._moves = ({}, {})
            self._move_entries.reset()
        rows = self._move_entries.new_rows()
        to, copy_of = self._moves
        for gi, kind, hour, other in zip(
            rows["global_index"].tolist(),
            rows["kind"].tolist(),
            rows["hour"].tolist(),
            rows["other"].tolist(),
            strict=True,
        ):
            if kind not in (MOVED_TO, COPY_OF):
                raise CorruptLogError(self._move_entries.path(), 0, f"unknown move kind {kind}")
            (to if kind == MOVED_TO else copy_of)[gi] = MessageId(hour, other)
        return self._moves

    def moved_to(self, gi: int) -> MessageId | None:
        """Where message ``gi`` lives now, if it was rescheduled."""
        return self._read_moves()[0].get(gi)

    def copy_of(self, gi: int) -> MessageId | None:
        """The original whose id message ``gi`` answers to, if it is a rescheduled copy."""
        return self._read_moves()[1].get(gi)

    def moves_reach(self, hour: int) -> bool:
        """Whether a message of this hour now lives at ``hour`` or later."""
        return any(mid.hour >= hour for mid in self._read_moves()[0].values())

    def add_moves(self, gis: list[int], kind: int, others: list[MessageId]) -> None:
        """Link each of ``gis`` to its ``others`` (MOVED_TO or COPY_OF): one append, and
        the links folded in without reading them back."""
        links = self._read_moves()[0 if kind == MOVED_TO else 1]
        self._move_entries.append(
            [(gi, kind, o.hour, o.global_index) for gi, o in zip(gis, others, strict=True)]
        )
        links.update(zip(gis, others, strict=True))

    # -- lateness ---------------------------------------------------------------

    def _read_late(self) -> tuple[dict[int, tuple[int, int]], dict[int, tuple[int, int]]]:
        """(policy, outcome) by globalIndex, each ``(kind, ms)`` (late_policies)."""
        if self._late is None:
            self._late = ({}, {})
            self._late_entries.reset()
        rows = self._late_entries.new_rows()
        policies, outcomes = self._late
        for gi, kind, ms in zip(
            rows["global_index"].tolist(), rows["kind"].tolist(), rows["ms"].tolist(), strict=True
        ):
            if kind in (DROP_AFTER, DLQ_AFTER):
                policies[gi] = (kind, ms)
            elif kind in (DROPPED, DEAD_LETTERED):
                outcomes[gi] = (kind, ms)
            else:
                raise CorruptLogError(self._late_entries.path(), 0, f"unknown lateness kind {kind}")
        return self._late

    def late_policies(self, gis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each of ``gis``: its policy kind (-1: delivered however late) and its
        max_lateness in ms; one dict look-up per message only in an hour that has any."""
        kinds = np.full(len(gis), -1, dtype=np.int64)
        limits = np.zeros(len(gis), dtype=np.int64)
        policies = self._read_late()[0]
        if policies:
            for k, gi in enumerate(np.asarray(gis).tolist()):
                p = policies.get(gi)
                if p is not None:
                    kinds[k], limits[k] = p
        return kinds, limits

    def late_outcome(self, gi: int) -> tuple[int, int] | None:
        """(DROPPED or DEAD_LETTERED, how late it was in ms) once message ``gi`` fell due too late."""
        return self._read_late()[1].get(gi)

    def add_late(self, gi: int, kind: int, ms: int) -> None:
        policies, outcomes = self._read_late()
        self._late_entries.append([(gi, kind, ms)])
        (policies if kind in (DROP_AFTER, DLQ_AFTER) else outcomes)[gi] = (kind, ms)

    # -- census ---------------------------------------------------------------

    def live_count(self) -> int:
        """Messages of this hour not cancelled: the index's length less the tombstones,
        without keeping a bitmap (a cancel writes one tombstone; np.unique guards anyway)."""
        n = self.count
        if self._cancelled is not None:
            return n - int(np.count_nonzero(self.cancelled_mask()))
        gis, _ = self._tombstones_from(0, n)
        return n - len(np.unique(gis))

    def live_keys(
        self, topic_id: int | None, after: tuple[int, int], stop_ms: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Messages not cancelled (of topic ``topic_id`` if given) whose key ``(slot_ms,
        local_index)`` lies past ``after`` and whose slot lies before ``stop_ms``, in key
        order, which is the order the wheel delivers them in: (globalIndexes, slots,
        local indexes). One pass over the index's columns."""
        view = self.index_view()
        slots = slot_ms(self.hour, view)
        lis = view["local_index"].astype(np.int64)
        gis = np.flatnonzero(self._live(view, topic_id, after, slots, lis) & (slots < stop_ms))
        order = np.lexsort((lis[gis], slots[gis]))
        gis = gis[order]
        return gis, slots[gis], lis[gis]

    def census(self, topic_id: int | None = None, after: tuple[int, int] | None = None) -> np.ndarray:
        """Messages of this hour not cancelled, per second (3,600 counts, int64); only
        topic ``topic_id``'s if given; only those whose key ``(slot_ms, local_index)`` lies
        past ``after`` if given (a delivery watermark).

        With neither, the heads' counts less the cancelled messages' seconds; else one
        pass over the index's columns."""
        n = self.count
        if topic_id is None and after is None:
            counts = self.heads.count.astype(np.int64)
            gis = np.unique(self._tombstones_from(0, n)[0])
            if len(gis):
                rows = self.index_view()[gis] if len(gis) > 64 else np.array([self.entry(g) for g in gis])
                counts -= np.bincount(rows["second_of_hour"], minlength=SECONDS_PER_HOUR)
            return counts
        view = self.index_view()
        keep = self._live(view, topic_id, after)
        return np.bincount(view["second_of_hour"][keep], minlength=SECONDS_PER_HOUR).astype(np.int64)

    def _live(
        self,
        view: np.ndarray,
        topic_id: int | None,
        after: tuple[int, int] | None,
        slots: np.ndarray | None = None,
        lis: np.ndarray | None = None,
    ) -> np.ndarray:
        """Which entries of ``view`` (the whole index) are not cancelled, of ``topic_id``
        if given, with keys past ``after`` if given; ``slots`` and ``lis`` when the caller
        has them already."""
        keep = np.ones(len(view), dtype=bool)
        keep[np.unique(self._tombstones_from(0, len(view))[0])] = False
        if topic_id is not None:
            keep &= view["topic_id"] == topic_id
        if after is not None:
            slots = slot_ms(self.hour, view) if slots is None else slots
            lis = view["local_index"].astype(np.int64) if lis is None else lis
            keep &= (slots > after[0]) | ((slots == after[0]) & (lis > after[1]))
        return keep

    def is_cancelled(self, gi: int) -> bool:
        mask = self.cancelled_mask()
        return bool(gi < len(mask) and mask[gi])

    def add_tombstones(self, gis: list[int]) -> None:
        """Tombstone messages ``gis`` (none of them already one): one append."""
        mask = self.cancelled_mask()
        f = self.files.writable(self.tomb_rel, TOMBSTONES)
        f.append(b"".join(map(TOMBSTONE.pack, gis)))
        mask[gis] = True
        self._tombs_read = TOMBSTONE.count_in(f.length)

    def close_files(self) -> None:
        """Release the fds (and maps); caches stay, files reopen on the next use."""
        for rel in (self.log_rel, self.idx_rel, self.tomb_rel, self.move_rel, self.late_rel):
            self.files.close(rel)

    def close(self, save_heads: bool = True) -> None:
        if save_heads:
            self.save_heads()
        self.close_files()
        self._heads = None
        self._cancelled = None
        self._moves = None
        self._late = None
        self._verified = 0

    def remove_cache_files(self) -> None:
        if os.path.exists(self.heads_path):
            os.unlink(self.heads_path)
