"""The chaos workload: a producer, a canceller and consumers, all through the SDK and the proxies.

* The producer sends batches of ``batch`` messages, each with its own key (so a batch
  resent across a failover is stored once), deliver times from ``past_ms`` ago to
  ``horizon_ms`` ahead, and a ``hot_share`` of them in one hot second one to two
  ``hot_every_ms`` ahead (10-20 s by default).
* The canceller cancels a ``cancel_share`` of what was acknowledged, at a moment between
  1.5 s before and 0.3 s after its deliver time, so both answers (200 and 409) occur.
* With a ``reschedule_share``, the rescheduler moves that share of what was acknowledged,
  at a moment from its acknowledgement to 0.3 s past its deliver time (so some moves
  race the delivery and get 409), to a time 0.5-4 s later or, when there is room, sooner;
  a third of those that moved move again. A third go by key, and about half of them go
  in batches (one call for the moves due together), the rest alone.
* Consumers pull, record, and ack at once; what they saw and how each ack ended goes in
  the :class:`History`. Consumer 1 pulls ahead and holds each message until the master's
  clock reaches its deliver time, as ``Client.consume`` does (horologe/client/holding.py),
  so the checker's early-by-the-true-clock rule covers that estimate across failovers.
  With a ``nack_share``, they nack that share of first hand-outs instead: the group's
  retry copy (a new id, the same body) must come back.
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
import time
from typing import NamedTuple

import httpx

from horologe.client import Client
from horologe.client.consuming import AHEAD_MS
from horologe.client.errors import (
    AlreadyDeliveredError,
    HorologeError,
    MessageCancelledError,
    NotFoundError,
)
from horologe.client.holding import MasterClock, by_time, released

from .history import History, nacked_not_retried, now_ms


def message_key(body: bytes) -> str:
    """The key a body was made from (:meth:`Workload.send_batch` pads it with dots)."""
    return body.decode(errors="replace").split(".", 1)[0]


class SendLog(httpx.HTTPTransport):
    """An httpx transport that counts the requests it sent (not those that could not
    connect: they never left). The SDK sends a call again after no answer, a 503 or a
    redirect, and some of those follow a proposal that may still commit; so an answer to
    a call sent more than once may be what an earlier send did."""

    sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return super().handle_request(request)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout):
            self.sent -= 1
            raise
        finally:
            self.sent += 1


class PlannedMove(NamedTuple):
    at: int  # when to make it (true ms)
    seq: int
    id: str
    key: str
    deliver_at: int  # the message's time as the rescheduler last knew it
    moves: int  # how often it moved before


def _outcome(result) -> str:
    """How one move ended, as the history records it."""
    if not isinstance(result, HorologeError):
        return "ok"
    for kind, name in (
        (AlreadyDeliveredError, "delivered"),
        (MessageCancelledError, "cancelled"),
        (NotFoundError, "not_found"),
    ):
        if isinstance(result, kind):
            return name
    return f"error: {result}"


class Workload:
    def __init__(
        self,
        urls: list[str],
        token: str,
        history: History,
        *,
        topic: str = "chaos",
        group: str = "chaos",
        batch: int = 10,
        pause_s: float = 0.05,
        past_ms: int = 2_000,
        horizon_ms: int = 30_000,
        hot_share: float = 0.2,
        hot_every_ms: int = 10_000,
        cancel_share: float = 0.05,
        consumers: int = 2,
        nack_share: float = 0.0,
        reschedule_share: float = 0.0,
    ) -> None:
        self.urls, self.token, self.history = urls, token, history
        self.topic, self.group = topic, group
        self.batch, self.pause_s = batch, pause_s
        self.past_ms, self.horizon_ms = past_ms, horizon_ms
        self.hot_share, self.cancel_share, self.nack_share = hot_share, cancel_share, nack_share
        self.hot_every_ms = hot_every_ms
        self.reschedule_share = reschedule_share
        self.rng = random.Random(history.seed)
        self._producing = threading.Event()
        self._consuming = threading.Event()
        self._cancels: list[tuple[int, str]] = []
        self._moves: list[PlannedMove] = []
        self._plans_lock = threading.Lock()  # both heaps
        self._seq = itertools.count(1)
        self.threads = [
            threading.Thread(target=self._produce, name="producer", daemon=True),
            threading.Thread(target=self._cancel, name="canceller", daemon=True),
        ] + [
            threading.Thread(target=self._consume, args=(k,), name=f"consumer{k}", daemon=True)
            for k in range(consumers)
        ]
        if reschedule_share:
            self.threads.append(threading.Thread(target=self._reschedule, name="rescheduler", daemon=True))

    def new_client(self, timeout: float = 10, retry_s: float = 10) -> Client:
        urls = list(self.urls)
        self.rng.shuffle(urls)
        return Client(urls, self.token, timeout=timeout, retry_s=retry_s)

    def start(self) -> None:
        self._producing.set()
        self._consuming.set()
        for t in self.threads:
            t.start()

    def stop_producing(self) -> None:
        self._producing.clear()
        if self.threads[0].is_alive():
            self.threads[0].join(30)

    def stop(self) -> None:
        self._producing.clear()
        self._consuming.clear()
        for t in self.threads:
            if t.is_alive():
                t.join(30)

    # -- producing and cancelling ------------------------------------------------------

    def _deliver_at(self, now: int) -> int:
        if self.rng.random() < self.hot_share:
            every = self.hot_every_ms
            return ((now // every) + 2) * every + self.rng.randrange(1000)
        return now + self.rng.randrange(-self.past_ms, self.horizon_ms)

    def send_batch(self, client: Client, count: int, body_bytes: int = 0) -> None:
        """Produce ``count`` messages in one request; record what was acknowledged."""
        sent = now_ms()
        msgs = []
        for _ in range(count):
            key = f"{self.history.seed}-{next(self._seq)}"
            body = key.ljust(body_bytes, ".")
            msgs.append({"topic": self.topic, "body": body, "key": key, "deliver_at": self._deliver_at(sent)})
        try:
            results = client.produce_batch(msgs)
        except HorologeError as e:
            self.history.add("produce_failures", sent_ms=sent, failed_ms=now_ms(), count=count, error=str(e))
            return
        acked = now_ms()
        for m, r in zip(msgs, results, strict=True):
            if isinstance(r, HorologeError):
                self.history.add("produce_failures", sent_ms=sent, failed_ms=acked, count=1, error=str(r))
                continue
            self.history.add(
                "produced", id=r.id, key=m["key"], deliver_at=r.deliver_at, sent_ms=sent, acked_ms=acked
            )
            if self.rng.random() < self.cancel_share:
                at = max(acked, r.deliver_at + self.rng.randint(-1500, 300))
                with self._plans_lock:
                    heapq.heappush(self._cancels, (at, r.id))
            if self.rng.random() < self.reschedule_share:
                self._plan_move(r.id, m["key"], r.deliver_at, acked, 0)

    def _produce(self) -> None:
        client = self.new_client(timeout=3, retry_s=10)
        while self._producing.is_set():
            self.send_batch(client, self.batch)
            time.sleep(self.pause_s)

    def _cancel(self) -> None:
        client = self.new_client(timeout=3, retry_s=10)
        while self._consuming.is_set():
            with self._plans_lock:
                due = self._cancels[0][0] <= now_ms() if self._cancels else False
                at, mid = heapq.heappop(self._cancels) if due else (0, "")
            if not due:
                time.sleep(0.01)
                continue
            sent = now_ms()
            try:
                client.cancel(mid)
                outcome = "ok"
            except AlreadyDeliveredError:
                outcome = "delivered"
            except NotFoundError:
                outcome = "not_found"
            except HorologeError as e:
                outcome = f"error: {e}"
            self.history.add("cancels", id=mid, sent_ms=sent, answered_ms=now_ms(), outcome=outcome)

    # -- rescheduling --------------------------------------------------------------------

    def _plan_move(self, mid: str, key: str, deliver_at: int, now: int, moves: int) -> None:
        """Move ``mid`` at a moment from now to 0.3 s past its deliver time."""
        at = now + self.rng.randint(0, max(0, deliver_at - now) + 300)
        with self._plans_lock:
            heapq.heappush(self._moves, PlannedMove(at, next(self._seq), mid, key, deliver_at, moves))

    def _new_time(self, deliver_at: int, now: int) -> int:
        """0.5-4 s later than ``deliver_at``, or (half the time, when there is room) sooner,
        yet never less than 0.3 s ahead."""
        if deliver_at - now >= 1_000 and self.rng.random() < 0.5:
            return now + self.rng.randint(300, deliver_at - now - 500)
        return max(deliver_at, now) + self.rng.randint(500, 4_000)

    def _reschedule(self) -> None:
        sends = SendLog()
        client = Client(self.urls, self.token, timeout=3, retry_s=10, transport=sends)
        while self._consuming.is_set():
            now = now_ms()
            with self._plans_lock:
                due = []
                while self._moves and self._moves[0].at <= now:
                    due.append(heapq.heappop(self._moves))
            if not due:
                time.sleep(0.01)
                continue
            together, alone = [], []
            for plan in due:
                move = (plan, self._new_time(plan.deliver_at, now), self.rng.random() < 1 / 3)
                (together if self.rng.random() < 0.5 else alone).append(move)
            if together:
                self._move(client, sends, together, batch=True)
            for move in alone:
                self._move(client, sends, [move], batch=False)
            time.sleep(0.1)  # moves falling due meanwhile go together: batches of several

    def _move(self, client: Client, sends: SendLog, moves: list, *, batch: bool) -> None:
        """Make ``moves`` ((plan, new time, by key)) in one call; record each."""
        before, sent = sends.sent, now_ms()
        try:
            if batch:
                items = [
                    ({"topic": self.topic, "key": p.key} if by_key else {"id": p.id}) | {"deliver_at": new}
                    for p, new, by_key in moves
                ]
                results = client.reschedule_batch(items)
            else:
                ((p, new, by_key),) = moves
                if by_key:
                    results = [client.reschedule_key(self.topic, p.key, deliver_at=new)]
                else:
                    results = [client.reschedule(p.id, deliver_at=new)]
        except HorologeError as e:
            results = [e] * len(moves)
        answered = now_ms()
        for (p, new, by_key), r in zip(moves, results, strict=True):
            outcome = _outcome(r)
            self.history.add(
                "reschedules",
                id=p.id,
                key=p.key,
                by="key" if by_key else "id",
                batch=batch,
                new_at=new,
                sent_ms=sent,
                answered_ms=answered,
                outcome=outcome,
                resent=sends.sent - before > 1,
            )
            if outcome == "ok" and p.moves == 0 and self.rng.random() < 1 / 3:
                self._plan_move(p.id, p.key, new, answered, 1)

    # -- consuming ----------------------------------------------------------------------

    def _consume(self, k: int) -> None:
        client = self.new_client(timeout=5, retry_s=5)
        nodes = {u: i for i, u in enumerate(self.urls)}
        clock = MasterClock() if k == 1 else None  # the consumer that holds
        while self._consuming.is_set():
            sent = now_ms()
            try:
                got = client.pull(
                    self.topic,
                    self.group,
                    max=100,
                    wait_ms=500,
                    visibility_ms=10_000,
                    ahead_ms=AHEAD_MS if clock else 0,
                )
            except HorologeError:
                time.sleep(0.1)
                continue
            base = client.endpoints.master or client.endpoints.order()[0]
            if clock is None:
                self._record(client, k, nodes.get(base), sent, now_ms(), got)
                continue
            clock.observe(got.clock_ms, now_ms())
            for part in _held(clock, got):
                self._record(client, k, nodes.get(base), sent, now_ms(), part)

    def _record(self, client: Client, k: int, node: int | None, sent: float, at: float, got: list) -> None:
        """What consumer ``k`` was handed at ``at`` (pulled from ``node``), then its acks and nacks."""
        for m in got:
            self.history.add(
                "consumed",
                id=m.id,
                receipt=m.receipt,
                sent_ms=sent,
                at_ms=at,
                node=node,
                consumer=k,
                deliver_at=m.deliver_at,
                delivered_at=m.delivered_at,
                attempt=m.attempt,
                key=message_key(m.body),
            )
        nacking = self.nack_share if self._producing.is_set() else 0.0  # none once the drain began
        nacked = {m.receipt for m in got if m.attempt == 0 and self.rng.random() < nacking}
        for kind, receipts in (
            ("acks", [m.receipt for m in got if m.receipt not in nacked]),
            ("nacks", [m.receipt for m in got if m.receipt in nacked]),
        ):
            if receipts:
                self._settle(client, kind, receipts)

    def _settle(self, client: Client, kind: str, receipts: list[str]) -> None:
        """Ack or nack ``receipts``; record how it ended."""
        call = client.ack if kind == "acks" else client.nack
        sent = now_ms()
        try:
            call(self.topic, self.group, receipts)
            self.history.add(kind, receipts=receipts, sent_ms=sent, at_ms=now_ms(), ok=True, error=None)
        except HorologeError as e:
            self.history.add(kind, receipts=receipts, sent_ms=sent, at_ms=now_ms(), ok=False, error=str(e))

    # -- waiting ------------------------------------------------------------------------

    def outstanding(self) -> set[str]:
        """Acknowledged, not cancelled (200), and not consumed yet, or nacked and not retried yet."""
        cancelled = {c["id"] for c in self.history.snapshot("cancels") if c["outcome"] == "ok"}
        consumed = self.history.snapshot("consumed")
        never = {p["id"] for p in self.history.snapshot("produced")} - cancelled - {c["id"] for c in consumed}
        nacks, acks = self.history.snapshot("nacks"), self.history.snapshot("acks")
        return never | nacked_not_retried(consumed, nacks, acks)

    def drain(self, slack_s: float = 45.0, progress=None) -> set[str]:
        """Wait until everything owed is consumed, and every cancel and move planned is
        made, or ``slack_s`` after the last deliver time (moves included)."""
        produced = self.history.snapshot("produced")
        last_due = max((p["deliver_at"] for p in produced), default=now_ms())
        with self._plans_lock:
            last_due = max([last_due] + [m.deliver_at + 4_300 for m in self._moves])  # the latest a move asks
        deadline = max(last_due, now_ms()) + slack_s * 1000
        while True:
            left = self.outstanding()
            with self._plans_lock:
                cancels_left = len(self._cancels) + len(self._moves)
            if (not left and not cancels_left) or now_ms() > deadline:
                return left
            if progress:
                progress(len(left))
            time.sleep(0.5)


def _held(clock: MasterClock, got: list):
    """``got`` in parts, each once the master's clock (as ``clock`` estimates it) reaches
    its messages' deliver time: what ``Client.consume`` hands over, when."""
    pending = by_time(got)
    while pending:
        wait = clock.release_at(pending[0].deliver_at) - now_ms()
        if wait > 0:
            time.sleep(wait / 1000)
        n = released(clock, pending, now_ms())
        if n:
            yield pending[:n]
            pending = pending[n:]
