"""Saturating ingest does not unseat the master (issue #14): heartbeats go out from the
tick thread that also applies entries, so an apply that ran long enough would let the
followers' election timers (0.3–0.6 s) run out. Counts and terms only, no timing."""

from __future__ import annotations

import threading
import time

import pytest

from horologe.client import Client
from testkit.process_cluster import CLIENT

SECONDS = 30
BODY = "x" * 200

pytestmark = pytest.mark.solo  # saturates the machine on purpose


def test_thirty_seconds_of_saturating_ingest_leave_the_term_unchanged(cluster):
    master = cluster.wait_connected()
    before = [cluster.status(i) for i in cluster.indexes]
    urls = [cluster.url(i) for i in cluster.indexes]
    far = int(time.time() * 1000) + 86_400_000
    deadline = time.monotonic() + SECONDS
    acked = [0, 0]
    errors: list[BaseException] = []

    def produce(k: int) -> None:
        try:
            with Client(urls, CLIENT, timeout=30, retry_s=0) as c:
                n = 0
                while time.monotonic() < deadline:
                    batch = [{"topic": "load", "body": BODY, "deliver_at": far + n + j} for j in range(1000)]
                    acked[k] += sum(1 for r in c.produce_batch(batch) if not isinstance(r, Exception))
                    n += 1000
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors  # retry_s=0: a 503 during an election would surface here
    after = [cluster.status(i) for i in cluster.indexes]
    assert sum(acked) >= 10 * 1000 * len(threads), acked  # it did saturate, for a while
    assert {s["term"] for s in after} == {before[0]["term"]}, (before, after)
    assert {s["leader"] for s in after} == {f"n{master + 1}"}
