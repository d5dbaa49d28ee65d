"""A background producer for failover tests: records what was acknowledged."""

from __future__ import annotations

import random
import threading
import time

from horologe.client import HorologeError
from testkit.process_cluster import Cluster
from testkit.waiting import wait_until


class Producer(threading.Thread):
    """Posts batches to random nodes until stopped; ``acked`` maps id -> deliver_at."""

    def __init__(
        self,
        cluster: Cluster,
        topic: str = "load",
        batch: int = 20,
        spread_ms: int = 2000,
        pause_s: float = 0.02,
        seed: int = 1,
    ) -> None:
        super().__init__(daemon=True)
        self.cluster, self.topic, self.batch, self.spread_ms, self.pause_s = (
            cluster,
            topic,
            batch,
            spread_ms,
            pause_s,
        )
        self.rng = random.Random(seed)
        self.acked: dict[str, int] = {}
        self.failures = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            now = int(time.time() * 1000)
            msgs = [
                {
                    "topic": self.topic,
                    "body": f"m{self.rng.random()}",
                    "deliver_at": now + self.rng.randrange(-200, self.spread_ms),
                }
                for _ in range(self.batch)
            ]
            i = self.rng.choice(self.cluster.alive() or [0])
            client = self.cluster.client(i, retry_s=0, timeout=3)
            try:
                res = client.request("POST", "/v1/messages/batch", {"messages": msgs}).body
                for r in res["results"]:
                    self.acked[r["id"]] = r["deliver_at"]
            except HorologeError:
                self.failures += 1
            time.sleep(self.pause_s)

    def wait_acked(self, n: int, timeout_s: float = 30.0) -> None:
        """Until ``n`` messages in all were acknowledged (the load is flowing)."""

        try:
            wait_until(lambda: len(self.acked) >= n, timeout_s)
        except TimeoutError as e:
            raise TimeoutError(
                f"{len(self.acked)} messages acknowledged in {timeout_s:g} s, not {n}; "
                f"{self.failures} requests failed"
            ) from e

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


def wait_delivered(
    cluster: Cluster, among: list[int] | None = None, timeout_s: float = 30.0, at_least: int = 0
) -> None:
    """Until every live node (or ``among``) has nothing pending and all have delivered the
    same count, ``at_least`` of them.

    ``at_least``, the messages the test had acknowledged, is needed when no live node is
    known to have applied them all: a master killed right after acknowledging a batch can
    leave the survivors holding it uncommitted until the new master's first entry commits,
    and until then they show nothing pending and the same count."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            sts = [cluster.status(i) for i in (among or cluster.alive())]
            last = [(s["node_id"], s["pending"], s["counters"]["delivered"], s["applied_index"]) for s in sts]
            delivered = {s["counters"]["delivered"] for s in sts}
            if all(s["pending"] == 0 for s in sts) and len(delivered) == 1 and delivered.pop() >= at_least:
                return
        except HorologeError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"still pending: {last}")
