"""Leases renewed for as long as a worker holds their messages (Celery, Dramatiq).

A task queue's worker pulls more than it runs at once (Celery's prefetch, Dramatiq's),
and each message's lease starts at the pull: a task that waits its turn behind others in
the worker, then runs, may outlast its lease, and the cluster then hands it to another
worker while this one still runs it. :class:`LeaseKeeper` renews every lease the worker
holds (pulled, not yet acked, released or dead-lettered) every third of the visibility,
one ``extend`` call per (topic, group): the visibility timeout is then how long a worker
that stopped (killed, frozen, cut off) keeps its tasks from the others, not how long a
task may wait and run.

``hold(topic, group, receipts)`` after a pull (the first starts the thread),
``let_go(...)`` once a message is acked, ``give_back(...)`` to release leases (the
messages go to another worker at once), ``dead_letter(...)`` to move messages to the
group's dead-letter queue, their leases held until the cluster took it; ``beat()`` from the
worker's consumer loop each time round, and ``with handing_over():`` around the loop's
hand-over of messages to the worker; ``close()`` stops. The leases are renewed only
while that loop goes on: a worker whose loop stopped (a deadlock, a main process stuck)
for ``STALE_S`` (or a third of the visibility, if longer) holds its tasks no longer, and
they go to other workers once their leases end. A loop that is handing messages over
goes on, however long that takes: Celery's solo pool runs the task right there, and a
prefork pool whose processes are all busy makes the loop wait there for one (a worker
whose pool no longer takes tasks keeps what it holds, as a task that hangs does). A
loop stopped on purpose (``consuming(False)``: Celery's warm shutdown cancels its
consumer, then waits for the tasks that run before it closes the channel) is no stall
either: what it holds is renewed until acked, given back or closed. A renewal that
fails is logged and tried again at the next round: a lease survives one failed round (a
third of it), so a short visibility also wants a short ``retry_s`` on the client.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

from .errors import HorologeError, UnavailableError
from .limits import MAX_ITEMS

log = logging.getLogger(__name__)

MIN_EVERY_S = 0.2  # however short the visibility, no busier than this
# The shortest lease a task queue's worker may take (Celery, Dramatiq): renewed every third
# of it, but at most every MIN_EVERY_S, a shorter one would end before it is renewed.
MIN_WORKER_VISIBILITY_MS = 1_000
STALE_S = 30.0  # a consumer loop silent this long holds its tasks no longer


class LeaseKeeper:
    def __init__(
        self, client, visibility_ms: int, every_s: float | None = None, clock=time.monotonic
    ) -> None:
        """``client``: a :class:`horologe.client.Client` (thread-safe), shared with the
        caller; ``visibility_ms``: the leases' length, as pulled and as renewed; ``every_s``:
        how often to renew (default a third of the visibility)."""
        self._client = client
        self._visibility_ms = visibility_ms
        self._every_s = every_s if every_s is not None else max(MIN_EVERY_S, visibility_ms / 3000)
        self._clock = clock
        self._stale_s = max(STALE_S, visibility_ms / 3000)
        self._beat_at = clock()
        self._handing_over = 0  # hand-overs under way (the consumer loop's thread only)
        self._consuming = True  # False: the loop stopped on purpose, its silence no stall
        self._said_stale = False
        # Per (topic, group): the leases found ended at the last round, and the receipts it renewed.
        self._said_ended: dict[tuple[str, str], tuple[int, frozenset[str]]] = {}
        self._held: dict[tuple[str, str], set[str]] = defaultdict(set)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None  # started by the first hold: none for a publisher

    def hold(self, topic: str, group: str, receipts) -> None:
        with self._lock:
            self._held[(topic, group)].update(receipts)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="horologe-leases", daemon=True)
                self._thread.start()

    def let_go(self, topic: str, group: str, receipts) -> None:
        with self._lock:
            held = self._held.get((topic, group))
            if held is not None:
                held.difference_update(receipts)

    def give_back(self, topic: str, group: str, receipts: list[str]) -> None:
        """Release these leases now (a requeue, a consumer closing): no longer renewed, their
        messages go to another worker at once. A release that fails is logged: they are
        handed out again when their leases end."""
        self.let_go(topic, group, receipts)
        if receipts:
            try:
                self._client.release(topic, group, receipts)
            except HorologeError as e:
                log.warning("%d leases not released (handed out again when they end): %s", len(receipts), e)

    def dead_letter(
        self, topic: str, group: str, receipts: list[str], what: str, *, raise_unavailable: bool = False
    ) -> bool:
        """Move these messages to the group's dead-letter queue now (a nack with
        ``dead_letter``), their leases held, and renewed, until the cluster has taken the
        nack; whether it did. The nack is sent again across a failover, even once it may
        have applied: the cluster applies one nack to a hand-out. A nack that fails is
        logged, naming ``what`` (the messages, for the log), and the leases are given back:
        the messages are handed out again rather than left leased by a worker that no
        longer knows them. With ``raise_unavailable``, one that no node took (for the
        client's ``retry_s``) raises UnavailableError instead, the leases still held, for
        the caller to send again."""
        try:
            self._client.nack(topic, group, receipts, dead_letter=True, resend=True)
        except HorologeError as e:
            if raise_unavailable and isinstance(e, UnavailableError):
                raise
            log.warning(
                "%s not moved to the dead-letter queue %%DLQ%%%s (its lease given back, so it is "
                "handed out again): %s",
                what,
                group,
                e,
            )
            self.give_back(topic, group, receipts)
            return False
        self.let_go(topic, group, receipts)
        return True

    def dead_letter_unreadable(self, topic: str, group: str, m, why: str, kind: str) -> None:
        """Pulled message ``m`` (held) is no ``kind`` (a kombu message, a Dramatiq message:
        another producer's), for reason ``why``: a warning that names it, and it goes to
        the group's dead-letter queue (:meth:`dead_letter`), as a task the worker cannot
        run does."""
        log.warning(
            "message %s of %s is no %s (%.200s): moved to the dead-letter queue %%DLQ%%%s",
            m.id,
            topic,
            kind,
            why,
            group,
        )
        self.dead_letter(topic, group, [m.receipt], f"message {m.id} of {topic}")

    def beat(self) -> None:
        """The worker's consumer loop went round: it is alive (any thread; one float)."""
        self._beat_at = self._clock()

    @contextlib.contextmanager
    def handing_over(self) -> Iterator[None]:
        """The consumer loop hands messages to the worker meanwhile, which may run a task
        there or wait there for room: the loop counts as going on, however long it takes."""
        self._handing_over += 1
        try:
            yield
        finally:
            self._handing_over -= 1
            self.beat()

    def consuming(self, consuming: bool) -> None:
        """Whether the consumer loop consumes (it beats) or stopped on purpose, the worker
        finishing what it holds (a warm shutdown)."""
        self._consuming = consuming
        self.beat()

    def held(self) -> int:
        with self._lock:
            return sum(len(receipts) for receipts in self._held.values())

    def renew(self) -> int:
        """One round: every lease held, renewed to the visibility from now; how many were
        (none while the consumer loop has been silent past the stale time, not handing
        messages over)."""
        silent_s = 0.0 if self._handing_over or not self._consuming else self._clock() - self._beat_at
        if silent_s > self._stale_s:
            if not self._said_stale:
                self._said_stale = True
                log.warning(
                    "the worker's consumer loop has not run for %.0f s: the %d leases it holds are "
                    "no longer renewed, and their tasks go to other workers as the leases end",
                    silent_s,
                    self.held(),
                )
            return 0
        self._said_stale = False
        with self._lock:
            rounds = [(key, sorted(receipts)) for key, receipts in self._held.items() if receipts]
        renewed = 0
        for (topic, group), receipts in rounds:
            ended = still = failed = 0
            for i in range(0, len(receipts), MAX_ITEMS):
                chunk = receipts[i : i + MAX_ITEMS]
                try:
                    extended = self._client.extend(topic, group, chunk, self._visibility_ms)["extended"]
                except HorologeError as e:
                    why = "%d leases on %s/%s not renewed (tried again soon): %s"
                    log.warning(why, len(chunk), topic, group, e)
                    failed += 1
                    continue
                renewed += extended
                with self._lock:  # those let go meanwhile (acked) were not to be renewed
                    held = len(self._held.get((topic, group), set()).intersection(chunk))
                still += held
                ended += max(0, held - extended)
            if not failed:  # a round that could not ask for every lease says nothing of them
                self._say_ended((topic, group), ended, still, frozenset(receipts))
        return renewed

    def _say_ended(self, key: tuple[str, str], ended: int, still: int, receipts: frozenset[str]) -> None:
        """Log leases found ended, once: again only when more are found than were at the
        last round, less those let go since (an ended one let go, another may have ended)."""
        said, before = self._said_ended.get(key, (0, frozenset()))
        if ended > said - len(before - receipts):
            log.warning(
                "%d of %d leases held on %s/%s had ended before they were renewed: this worker was "
                "stalled past them (the cluster may have handed those messages to another worker), "
                "or a worker that held them before acked them",
                ended,
                still,
                *key,
            )
        if ended:
            self._said_ended[key] = (ended, receipts)
        else:
            self._said_ended.pop(key, None)

    def close(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self.renew()
            except Exception:  # noqa: BLE001 - the thread must go on renewing whatever one round met
                log.exception("renewing leases failed")
