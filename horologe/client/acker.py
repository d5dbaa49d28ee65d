"""Acks sent in the background, gathered per (topic, group): for workers that ack each
message as they take it up (Celery, Dramatiq), where one ack call per message would make
one Raft entry each.

``ack(topic, group, receipt)`` queues; a thread sends what gathered within
``ACK_LINGER_S`` of the first, up to ``MAX_ITEMS`` (limits.py) receipts a call, and tells
``settled(topic, group, receipts)`` once the cluster took them (the lease keeper's
``let_go``: a message's lease is renewed until its ack is in). An ack that no node took
(the cluster out of reach for the client's ``retry_s``) is kept and sent again every
``RESEND_S``, its lease still renewed, so its message is handed out again only if the
cluster stays out of reach past the lease. One the cluster refused, or whose call failed
otherwise (the client closed under it), is logged and settled (its message comes back when
its lease ends: at least once).

``flush()`` waits until everything queued before it was sent once (taken, refused or
kept); ``close()`` flushes, sends what is kept once more, and stops: what is still not
taken is logged.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable

from .consuming import gather
from .errors import HorologeError, UnavailableError
from .limits import MAX_ITEMS

log = logging.getLogger(__name__)

RESEND_S = 1.0  # how often acks that no node took are sent again

Ack = tuple[str, str, str]  # topic, group, receipt


class Acker:
    def __init__(self, client, settled: Callable[[str, str, list[str]], None] | None = None) -> None:
        """``client``: a :class:`horologe.client.Client` (thread-safe), shared with the
        caller; ``settled``: told the receipts whose acks the cluster took or refused."""
        self._client = client
        self._settled = settled or (lambda topic, group, receipts: None)
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False  # set under the lock once the thread sends no more
        self._said_kept = False  # the acks kept were logged (once per stretch out of reach)
        self._thread = threading.Thread(target=self._run, name="horologe-acker", daemon=True)
        self._thread.start()

    def ack(self, topic: str, group: str, receipt: str) -> None:
        self._queue.put((topic, group, receipt))

    def flush(self, timeout_s: float | None = None) -> None:
        """Return once every ack queued before this call was sent once (taken, refused,
        or kept to be sent again); at once once closed (nothing sends any more)."""
        done = threading.Event()
        with self._lock:
            if self._closed:
                return
            self._queue.put(done)
        done.wait(timeout_s)

    def close(self, timeout_s: float | None = 10.0) -> None:
        """Flush, then stop; again: nothing."""
        self.flush(timeout_s)
        self._queue.put(None)
        self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            self._send_until_closed()
        finally:
            with self._lock:  # a flush from now on returns at once; one queued before is told
                self._closed = True
            while not self._queue.empty():
                item = self._queue.get_nowait()
                if isinstance(item, threading.Event):
                    item.set()

    def _send_until_closed(self) -> None:
        kept: list[Ack] = []  # acks no node took yet
        resend_at = 0.0  # monotonic s: when to send them again
        closing = False
        while not closing:
            try:
                first = self._queue.get(timeout=max(0.0, resend_at - time.monotonic()) if kept else None)
            except queue.Empty:
                items = []
            else:
                items = gather(self._queue, first, lambda item: not isinstance(item, tuple))
            closing = bool(items) and items[-1] is None
            batch = [item for item in items if isinstance(item, tuple)]
            if closing or time.monotonic() >= resend_at:
                batch, kept = kept + batch, []
            failed = self._send(batch)
            if failed and not kept:
                resend_at = time.monotonic() + RESEND_S
            kept += failed
            for item in items:
                if isinstance(item, threading.Event):
                    item.set()
        if kept:
            log.warning(
                "%d acks not taken by any node as this closes: their messages are handed out "
                "again when their leases end",
                len(kept),
            )

    def _send(self, acks: list[Ack]) -> list[Ack]:
        """One call per (topic, group) and ``MAX_ITEMS`` receipts; the acks no node took."""
        by: dict[tuple[str, str], list[str]] = defaultdict(list)
        for topic, group, receipt in acks:
            by[(topic, group)].append(receipt)
        kept: list[Ack] = []
        for (topic, group), receipts in by.items():
            for i in range(0, len(receipts), MAX_ITEMS):
                chunk = receipts[i : i + MAX_ITEMS]
                try:
                    self._client.ack(topic, group, chunk)
                except UnavailableError as e:
                    if not self._said_kept:
                        why = "%d acks on %s/%s not taken by any node (sent again every %g s, "
                        why += "their leases renewed meanwhile): %s"
                        log.warning(why, len(chunk), topic, group, RESEND_S, e)
                    self._said_kept = True
                    kept += [(topic, group, r) for r in chunk]
                    continue
                except HorologeError as e:
                    why = "%d acks on %s/%s refused (handed out again after their lease): %s"
                    log.warning(why, len(chunk), topic, group, e)
                except Exception:  # noqa: BLE001 - the thread must go on sending the acks after it
                    why = "%d acks on %s/%s failed (handed out again after their lease)"
                    log.exception(why, len(chunk), topic, group)
                self._settled(topic, group, chunk)
        if not kept and self._said_kept:
            self._said_kept = False
            log.info("the acks that no node took were sent again")
        return kept
