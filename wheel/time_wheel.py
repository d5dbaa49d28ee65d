"""The two-level time wheel: which stored messages are due, by a time passed in.

* **Hour level**: the hours that hold messages, from the watermark's hour up to the
  maximum delay (a sorted list: a slot per non-empty hour, as a DelayQueue holds
  only non-empty slots).
* **Second level**: the 3,600 seconds of an hour, read from that hour's heads.
  Seconds up to ``preload_ms`` ahead are loaded into memory, sorted for delivery.

The wheel never reads a clock, sleeps or starts a thread: the asyncio driver asks
:meth:`next_due_ms`, sleeps until then (or until :meth:`on_append` reports an earlier
message), and calls :meth:`advance_to` with its clock. An idle wheel costs nothing.

The wheel only *proposes* how far delivery may go (its watermark). What is delivered
is decided when an advance is committed, by :func:`expand` on every node; the refs
the wheel returns are what that expansion will deliver.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

import numpy as np

from horologe.storage.store_reads import StoreReads

from .errors import DelayTooLongError
from .expand import nonempty_seconds
from .loaded_second import LoadedSecond, empty_due
from .realign import FastForward
from .watermark import ALL, MS_PER_HOUR, Watermark

DEFAULT_PRELOAD_MS = 10_000
DEFAULT_MAX_DELAY_MS = 400 * 24 * MS_PER_HOUR
NEVER = 1 << 62


class TimeWheel:
    def __init__(
        self,
        store: StoreReads,
        ws: Watermark,
        *,
        preload_ms: int = DEFAULT_PRELOAD_MS,
        max_delay_ms: int | None = DEFAULT_MAX_DELAY_MS,
    ) -> None:
        """``max_delay_ms``: how far past the watermark a slot may be (None: no bound)."""
        self.store = store
        self.preload_ms = preload_ms
        self.max_delay_ms = max_delay_ms
        self._ws = ws
        self._hours = [h for h in store.hours() if h >= ws.hour]  # the hour level
        self._seconds: dict[int, LoadedSecond] = {}  # loaded seconds, by epoch second
        self._order: list[int] = []  # their keys, ascending
        self._horizon_ms = ws.tick * 1000  # every second starting before this is loaded
        # The first message at or past the horizon, looked up without loading its second
        # (None: not looked up; NEVER: none). Loading it would move the horizon to it, days
        # ahead maybe, and every second an arrival brings before it would stay loaded.
        self._beyond_ms: int | None = None
        self._wait_ms = NEVER  # what next_due_ms() last told the driver
        self._mapped_hour: int | None = None
        self._remap()

    @property
    def ws(self) -> Watermark:
        return self._ws

    # -- loading --------------------------------------------------------------

    def _load(self, abs_sec: int) -> LoadedSecond:
        s = self._seconds.get(abs_sec)
        if s is None:
            s = self._seconds[abs_sec] = LoadedSecond(self.store, abs_sec)
            bisect.insort(self._order, abs_sec)
        return s

    def _extend(self, until_ms: int) -> None:
        """Preload every non-empty second that starts before ``until_ms``."""
        until_ms = -(-until_ms // 1000) * 1000
        if until_ms <= self._horizon_ms:
            return
        for abs_sec in nonempty_seconds(self.store, self._horizon_ms, until_ms - 1, self._hours):
            self._load(abs_sec).refresh()
        self._horizon_ms = until_ms
        if self._beyond_ms is not None and self._beyond_ms < until_ms:
            self._beyond_ms = None  # loaded now

    def _first_pending(self) -> tuple[LoadedSecond, int] | None:
        """The loaded second holding the earliest message ahead of the watermark."""
        drop = 0  # leading seconds that nothing can be ahead of any more
        found = None
        for i, abs_sec in enumerate(self._order):
            s = self._seconds[abs_sec]
            s.refresh()
            pos = s.first_after(self._ws)
            if pos < len(s.rows):
                found = (s, pos)
                break
            if drop == i and s.fully_behind(self._ws):
                drop = i + 1
        for abs_sec in self._order[:drop]:
            del self._seconds[abs_sec]
        del self._order[:drop]
        return found

    def _remap(self) -> None:
        """On entering an hour: map it and the next, release the rest (docs/wheel.md)."""
        hour = self._ws.hour
        if hour != self._mapped_hour:
            self._mapped_hour = hour
            self.store.map_hours([hour, hour + 1])
            del self._hours[: bisect.bisect_left(self._hours, hour)]

    # -- the driver's interface -----------------------------------------------

    def next_due_ms(self) -> int | None:
        """When the earliest pending message falls due; None when nothing is pending."""
        hit = self._first_pending()
        if hit is not None:
            self._wait_ms = int(hit[0].rows["slot_ms"][hit[1]])
        else:
            if self._beyond_ms is None:
                self._beyond_ms = self._look_beyond()
            self._wait_ms = self._beyond_ms
        return None if self._wait_ms == NEVER else self._wait_ms

    def _look_beyond(self) -> int:
        """The first message at or past the horizon (NEVER: none), read from its second
        without keeping it loaded."""
        for abs_sec in nonempty_seconds(self.store, self._horizon_ms, NEVER, self._hours):
            s = LoadedSecond(self.store, abs_sec)
            s.refresh()
            pos = s.first_after(self._ws)
            if pos < len(s.rows):
                return int(s.rows["slot_ms"][pos])
        return NEVER

    def on_append(self, slots_ms: Iterable[int] | np.ndarray) -> bool:
        """Take note of newly stored messages; True when one is due before the driver's wait."""
        slots = np.asarray(slots_ms, dtype=np.int64)
        slots = slots[~self._ws.passed_many(slots)]  # the rest were delivered on arrival
        if not len(slots):
            return False
        too_far = slots[slots - self._ws.ms > self.max_delay_ms] if self.max_delay_ms is not None else ()
        if len(too_far):
            raise DelayTooLongError(f"slot {too_far[0]} is beyond the maximum delay of the hour wheel")
        for hour in np.unique(slots // MS_PER_HOUR).tolist():
            i = bisect.bisect_left(self._hours, hour)
            if i == len(self._hours) or self._hours[i] != hour:
                self._hours.insert(i, hour)
        for abs_sec in np.unique(slots[slots < self._horizon_ms] // 1000).tolist():
            self._load(abs_sec)
        beyond = slots[slots >= self._horizon_ms]
        if self._beyond_ms is not None and len(beyond):
            self._beyond_ms = min(self._beyond_ms, int(beyond.min()))
        earliest = int(slots.min())
        if earliest < self._wait_ms:
            self._wait_ms = earliest
            return True
        return False

    def advance_to(self, now_ms: int, limit: int | None = None) -> np.ndarray:
        """Release the messages due by ``now_ms`` (at most ``limit``), in delivery order.

        Rows are loaded_second.DUE. Nothing is ever returned before its slot time.
        The watermark moves to the last row returned, or to ``now_ms`` once all that
        is due has been returned.
        """
        self._extend(now_ms + 1 + self.preload_ms)
        out = []
        taken = 0
        cut_short = False  # stopped by the limit: more may be due, so W stays on the last row
        while True:
            if limit is not None and taken >= limit:
                cut_short = True
                break
            hit = self._first_pending()
            if hit is None:
                break
            s, pos = hit
            stop = int(np.searchsorted(s.rows["slot_ms"], now_ms, "right"))
            if stop <= pos:
                break
            if limit is not None:
                stop = min(stop, pos + limit - taken)
            chunk = s.rows[pos:stop]
            out.append(chunk)
            taken += len(chunk)
            last = chunk[-1]
            self._ws = Watermark(int(last["slot_ms"]), int(last["local_index"]))
        if not cut_short and Watermark(now_ms, ALL) > self._ws:
            self._ws = Watermark(now_ms, ALL)
        self._remap()
        return np.concatenate(out) if out else empty_due()

    def pending_slots(self, until_ms: int, limit: int) -> np.ndarray:
        """The slots (ms) of the first ``limit`` messages ahead of the watermark due by
        ``until_ms``, in delivery order (for :func:`~horologe.wheel.hot_lead.stretched_lead`)."""
        self._extend(until_ms + 1)
        if self._first_pending() is None:  # also drops the seconds left behind
            return np.empty(0, dtype=np.int64)
        parts, taken = [], 0
        for abs_sec in self._order:
            if abs_sec * 1000 > until_ms or taken >= limit:
                break
            s = self._seconds[abs_sec]
            s.refresh()
            slot = s.rows["slot_ms"]
            pos, stop = s.first_after(self._ws), int(np.searchsorted(slot, until_ms, "right"))
            stop = min(stop, pos + limit - taken)
            if stop > pos:
                parts.append(slot[pos:stop])
                taken += stop - pos
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)

    def fast_forward(self, plan: FastForward) -> Iterator[np.ndarray]:
        """Deliver an expired span in batches of at most ``plan.batch_limit`` refs."""
        while True:
            batch = self.advance_to(plan.to_ms, plan.batch_limit)
            yield batch
            if len(batch) < plan.batch_limit:
                return

    def pending_seconds_loaded(self) -> int:
        return len(self._order)
