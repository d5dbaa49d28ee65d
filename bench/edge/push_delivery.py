"""``python -m bench.edge.push_delivery [--quick]``: push delivery, measured at the receiver.

Three ``horologe node`` processes (testkit's process cluster, ``push_allow`` set to
127.0.0.1) and a webhook receiver in a process of its own (push_receiver.py: aiohttp on
127.0.0.1, every signature checked with the SDK's ``verify_signature``), all on this
machine. Two figures, each on a fresh cluster and receiver:

* **throughput**: ``burst`` messages are made ready first (due now, no push group yet),
  then the subscription is put; pushes per second from the PUT until the last of them
  arrives (``max_in_flight`` 128, no rate limit);
* **lateness**: the subscription is put, then ``lateness_rate`` msg/s are stored for
  ``lateness_s`` seconds of deliver times, 6 s ahead; lateness is the receiver's clock at
  arrival minus each message's ``deliver_at``.

Issue #16's targets: >= 10k msg/s, p99 lateness <= 20 ms. It prints what it measures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import click

from horologe.client import Client
from testkit.process_cluster import CLIENT

from .horologe_system import TOPIC, HorologeSystem
from .workloads import Scale, _load, now_ms, pct

SECRET = "bench-push-secret-0123"
ALLOW = 'push_allow = ["127.0.0.1/32"]\n'
IN_FLIGHT = 128
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Receiver:
    """The webhook receiver (push_receiver.py) in a process of its own, as a user runs one."""

    def __init__(self, expect: int, out: str) -> None:
        self.expect = expect
        self.out = out
        # Once it stopped: (arrival ms, id, deliver_at) of each signed push, in arrival
        # order; the unsigned ones; when the last of the ``expect`` ids arrived.
        self.got: list[tuple[float, str, int]] = []
        self.unsigned = 0
        self.all_at: float | None = None

    def start(self) -> Receiver:
        cmd = [sys.executable, "-m", "bench.edge.push_receiver"]
        cmd += ["--secret", SECRET, "--expect", str(self.expect), "--out", self.out]
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=REPO)
        self.url = self._proc.stdout.readline().strip()  # its only line
        self._proc.stdout.close()
        if not self.url:
            raise RuntimeError(f"the push receiver did not start (exit status {self._proc.wait(10)})")
        return self

    def wait(self, timeout_s: float) -> None:
        """Until ``expect`` distinct ids arrived (then what arrived is in ``got``), else TimeoutError."""
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            have = len({mid for _, mid, _ in self.got})
            raise TimeoutError(f"{have} of {self.expect} pushes in {timeout_s:.0f} s") from None
        if self._proc.returncode:
            raise RuntimeError(f"the push receiver failed (exit status {self._proc.returncode})")
        self._read()

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(10)
            self._read()

    def _read(self) -> None:
        with open(self.out) as f:
            rows = [json.loads(line) for line in f]
        self.unsigned = rows.pop()["unsigned"]
        self.got = [tuple(r) for r in rows]
        ids: set[str] = set()
        for at, mid, _ in self.got:
            ids.add(mid)
            if len(ids) == self.expect:
                self.all_at = at
                break


def _run(root: str, expect: int, measure) -> dict:
    system = HorologeSystem(root, node_toml=ALLOW)
    receiver = Receiver(expect, root + ".pushes.jsonl").start()
    system.start()
    try:
        with Client(system.urls, CLIENT, timeout=60, retry_s=30) as client:
            return measure(system, client, receiver)
    finally:
        system.stop()
        receiver.stop()


def throughput(system, client: Client, receiver: Receiver, n: int) -> dict:
    _load(system, n, lambda _i: int(now_ms()))
    t0 = now_ms()
    client.put_subscription(TOPIC, "push", receiver.url, SECRET, max_in_flight=IN_FLIGHT)
    receiver.wait(600)
    took_s = (receiver.all_at - t0) / 1000
    return {"pushes/s": n / took_s, "sent again": len(receiver.got) - n, "unsigned": receiver.unsigned}


def lateness(system, client: Client, receiver: Receiver, rate: int, seconds: int) -> dict:
    client.put_subscription(TOPIC, "push", receiver.url, SECRET, max_in_flight=IN_FLIGHT)
    n = rate * seconds
    t0 = int(now_ms()) + 6_000
    _load(system, n, lambda i: t0 + i * 1000 // rate)
    if now_ms() >= t0:
        raise RuntimeError("loading took longer than the lead before the first deliver time")
    receiver.wait(seconds + 120)
    late = [at - d for at, _, d in receiver.got]
    return {
        "lateness p50 ms": pct(late, 50),
        "lateness p99 ms": pct(late, 99),
        "lateness max ms": max(late),
        "early (count)": sum(1 for x in late if x < 0),
    }


@click.command()
@click.option("--quick", is_flag=True, help="a tenth of the counts: a smoke run, not figures to quote")
def main(quick: bool) -> None:
    """Push delivery at the receiver: throughput, and lateness at 2,000 msg/s due."""
    scale = Scale().quick() if quick else Scale()
    burst = scale.hot // 5  # 20,000 (2,000 quick)
    with tempfile.TemporaryDirectory(prefix="horologe-push-bench-") as root:
        fig = _run(os.path.join(root, "t"), burst, lambda s, c, r: throughput(s, c, r, burst))
        print(f"push throughput, {burst} ready at once, max_in_flight {IN_FLIGHT}: {fig}")
        rate, seconds = scale.lateness_rate, scale.lateness_s
        fig = _run(os.path.join(root, "l"), rate * seconds, lambda s, c, r: lateness(s, c, r, rate, seconds))
        print(f"push lateness at the receiver, {rate} msg/s for {seconds} s: {fig}")


if __name__ == "__main__":
    main()
