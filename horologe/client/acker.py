"""Acks sent in the background, gathered per (topic, group): for workers that ack each
message as they take it up (Celery, Dramatiq), where one ack call per message would make
one Raft entry each.

``ack(topic, group, receipt)`` queues; a thread sends what gathered within
``ACK_LINGER_S`` of the first, up to ``MAX_ITEMS`` (limits.py) receipts a call. ``flush()`` waits until
everything queued before it was sent; ``close()`` flushes and stops. A failed ack is
logged and dropped: its message comes back when its lease ends (at least once).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import defaultdict

from .consuming import gather
from .errors import HorologeError

log = logging.getLogger(__name__)


class Acker:
    def __init__(self, client) -> None:
        """``client``: a :class:`horologe.client.Client` (thread-safe), shared with the caller."""
        self._client = client
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False  # set under the lock once the thread sends no more
        self._thread = threading.Thread(target=self._run, name="horologe-acker", daemon=True)
        self._thread.start()

    def ack(self, topic: str, group: str, receipt: str) -> None:
        self._queue.put((topic, group, receipt))

    def flush(self, timeout_s: float | None = None) -> None:
        """Return once every ack queued before this call was sent (or failed); at once
        once closed (nothing sends any more)."""
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
        while True:
            first = self._queue.get()
            if first is None:
                return
            items = gather(self._queue, first, lambda item: not isinstance(item, tuple))
            self._send([item for item in items if isinstance(item, tuple)])
            for item in items:
                if isinstance(item, threading.Event):
                    item.set()
            if items[-1] is None:
                return

    def _send(self, acks: list[tuple[str, str, str]]) -> None:
        """At most ``MAX_ITEMS`` (limits.py) acks (one gathering): one call per (topic, group)."""
        by: dict[tuple[str, str], list[str]] = defaultdict(list)
        for topic, group, receipt in acks:
            by[(topic, group)].append(receipt)
        for (topic, group), receipts in by.items():
            try:
                self._client.ack(topic, group, receipts)
            except HorologeError as e:
                log.warning(
                    "%d acks on %s/%s not sent (handed out again after their lease): %s",
                    len(receipts),
                    topic,
                    group,
                    e,
                )
