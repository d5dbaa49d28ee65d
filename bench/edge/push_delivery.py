"""``python -m bench.edge.push_delivery [--quick]``: push delivery, measured at the receiver.

Three ``horologe node`` processes (testkit's process cluster, ``push_allow`` set to
127.0.0.1) and an aiohttp receiver on 127.0.0.1 that checks every signature with the
SDK's ``verify_signature`` and answers 200, all on this machine. Two figures, each on a
fresh cluster:

* **throughput**: ``burst`` messages are made ready first (due now, no push group yet),
  then the subscription is put; pushes per second from the PUT until the receiver has
  every one (``max_in_flight`` 128, no rate limit);
* **lateness**: the subscription is put, then ``lateness_rate`` msg/s are stored for
  ``lateness_s`` seconds of deliver times, 6 s ahead; lateness is the receiver's clock at
  arrival minus each message's ``deliver_at``.

Issue #16's targets: >= 10k msg/s, p99 lateness <= 20 ms. It prints what it measures.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
import time

import click
from aiohttp import web

from horologe.client import Client, verify_signature
from testkit.process_cluster import CLIENT

from .horologe_system import TOPIC, HorologeSystem
from .workloads import Scale, _load, now_ms, pct

SECRET = "bench-push-secret-0123"
ALLOW = 'push_allow = ["127.0.0.1/32"]\n'
IN_FLIGHT = 128


class Receiver:
    """Counts what arrives: (arrival ms, id, deliver_at) of each signed push, and the ids."""

    def __init__(self) -> None:
        self.got: list[tuple[float, str, int]] = []
        self.ids: set[str] = set()  # kept as they arrive: the waiting thread only counts them
        self.unsigned = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def start(self) -> Receiver:
        self._thread.start()
        self._ready.wait(10)
        return self

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/hook"
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        at = now_ms()
        if not verify_signature(SECRET, request.headers.get("Horologe-Signature"), raw):
            self.unsigned += 1
            return web.Response(status=401)
        msg = json.loads(raw)
        self.got.append((at, msg["id"], msg["deliver_at"]))
        self.ids.add(msg["id"])
        return web.Response(text="ok")

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def _wait_for(receiver: Receiver, n: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while len(receiver.ids) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(receiver.got)} of {n} pushes in {timeout_s:.0f} s")
        time.sleep(0.01)


def _run(root: str, measure) -> dict:
    system = HorologeSystem(root, node_toml=ALLOW)
    receiver = Receiver().start()
    system.start()
    try:
        with Client(system.urls, CLIENT, timeout=60, retry_s=30) as client:
            return measure(system, client, receiver)
    finally:
        system.stop()
        receiver.stop()


def throughput(system, client: Client, receiver: Receiver, n: int) -> dict:
    _load(system, n, lambda _i: int(now_ms()))
    t0 = time.perf_counter()
    client.put_subscription(TOPIC, "push", receiver.url, SECRET, max_in_flight=IN_FLIGHT)
    _wait_for(receiver, n, 600)
    took = time.perf_counter() - t0
    return {"pushes/s": n / took, "sent again": len(receiver.got) - n, "unsigned": receiver.unsigned}


def lateness(system, client: Client, receiver: Receiver, rate: int, seconds: int) -> dict:
    client.put_subscription(TOPIC, "push", receiver.url, SECRET, max_in_flight=IN_FLIGHT)
    n = rate * seconds
    t0 = int(now_ms()) + 6_000
    _load(system, n, lambda i: t0 + i * 1000 // rate)
    if now_ms() >= t0:
        raise RuntimeError("loading took longer than the lead before the first deliver time")
    _wait_for(receiver, n, seconds + 120)
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
        fig = _run(os.path.join(root, "t"), lambda s, c, r: throughput(s, c, r, burst))
        print(f"push throughput, {burst} ready at once, max_in_flight {IN_FLIGHT}: {fig}")
        fig = _run(
            os.path.join(root, "l"), lambda s, c, r: lateness(s, c, r, scale.lateness_rate, scale.lateness_s)
        )
        print(f"push lateness at the receiver, {scale.lateness_rate} msg/s for {scale.lateness_s} s: {fig}")


if __name__ == "__main__":
    main()
