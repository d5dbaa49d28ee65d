"""Recurring schedules in a chaos run: created over the public API, consumed, recorded.

:meth:`ScheduleLoad.create` makes each schedule of ``SCHEDULES`` with a window of fire
times, ``[start_at, end_at)``, from a whole second just ahead, and records it in the
history (``schedules``); a consumer thread pulls the schedules' topic as its own group,
through every node's proxy, records each hand-out (``schedule_fires``, with the key the
message carries) and acks it. The checker (schedule_checker.py) holds the hand-outs
against the window.
"""

from __future__ import annotations

import threading
import time

from horologe.client import Client, HorologeError

from .history import History, now_ms
from .schedule_checker import expected_fires

TOPIC = "schedules"
GROUP = "schedules"
# Each second in UTC, and each even second in a zone off UTC by 5 h 45 min (seconds first).
SCHEDULES = (
    ("every-second", "* * * * * *", "UTC"),
    ("every-2s-kathmandu", "*/2 * * * * *", "Asia/Kathmandu"),
)


class ScheduleLoad:
    def __init__(self, urls: list[str], token: str, history: History) -> None:
        self.history = history
        self.client = Client(urls, token, timeout=5, retry_s=15)
        self.consumer = Client(urls, token, timeout=5, retry_s=5)
        self.keys: set[str] = set()  # every key handed out so far
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._consume, name="schedule-consumer", daemon=True)

    def create(self, window_s: int, lead_s: int = 3) -> int:
        """Create the schedules, each firing for ``window_s`` seconds from a whole second
        ``lead_s`` or so ahead; start consuming; return the window's end (epoch ms). A
        schedule created after its ``start_at`` (the master's clock in the entry) plans
        from its creation: its window is recorded from there (the lead keeps that rare)."""
        start = (now_ms() // 1000 + lead_s) * 1000
        end = start + window_s * 1000
        self._thread.start()
        for name, cron, zone in SCHEDULES:
            made = self.client.create_schedule(name, TOPIC, name, cron, zone, start_at=start, end_at=end)
            self.history.add(
                "schedules",
                name=name,
                topic=TOPIC,
                cron=cron,
                timezone=zone,
                # what is owed: a schedule plans from its creation when that came after start_at
                start_at=max(start, made.created_at + 1),
                end_at=end,
                created_ms=now_ms(),
            )
        return end

    def expected(self) -> int:
        return sum(
            len(expected_fires(s["cron"], s["timezone"], s["start_at"], s["end_at"]))
            for s in self.history.snapshot("schedules")
        )

    def drain(self, end_ms: int, slack_s: float = 30.0, quiet_s: float = 2.0) -> None:
        """Wait past the window's end until every fire time was received (or ``slack_s``
        passed), then ``quiet_s`` more for anything that would come twice; stop."""
        time.sleep(max(0.0, (end_ms - now_ms()) / 1000))
        deadline = time.monotonic() + slack_s
        while len(self.keys) < self.expected() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(quiet_s)
        self.stop()

    def stop(self) -> None:
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join(15)
        self.client.close()
        self.consumer.close()

    def _consume(self) -> None:
        while not self._halt.is_set():
            sent = now_ms()
            try:
                got = self.consumer.pull(TOPIC, GROUP, max=100, wait_ms=300, visibility_ms=5_000)
            except HorologeError:
                time.sleep(0.1)
                continue
            at = now_ms()
            for m in got:
                self.keys.add(m.key)
                self.history.add(
                    "schedule_fires",
                    id=m.id,
                    key=m.key,
                    receipt=m.receipt,
                    sent_ms=sent,
                    at_ms=at,
                    deliver_at=m.deliver_at,
                    delivered_at=m.delivered_at,
                    attempt=m.attempt,
                )
            if got:
                try:
                    self.consumer.ack(TOPIC, GROUP, got.receipts())
                except HorologeError:
                    pass  # handed out again after the lease: a redelivery, told apart by its id
