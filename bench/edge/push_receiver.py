"""``python -m bench.edge.push_receiver``: the push bench's webhook receiver, a process of its own.

A user's webhook server runs in a process of its own, and so does this one. Run as a
thread of the bench process, it stopped whenever the bench's interpreter ran a full
collection over the bench's own heap (28-52 ms here), and every push that arrived
meanwhile was stamped that much late: the "unexplained push tail" of
docs/benchmarks.md. Like a node (node/main.py), it moves what its start-up made out of
later collections (``gc.freeze``).

It listens on 127.0.0.1 (a free port), checks every push's signature with the SDK's
``verify_signature`` and answers 200 (401 when the signature is wrong), and stamps each
signed push with its arrival time (ms since the epoch, before the check). It prints its
URL as the first line of stdout, stops once ``--expect`` distinct ids have arrived (or
on SIGTERM or SIGINT), and then writes ``--out``: one JSON line per signed push,
``[arrival_ms, id, deliver_at]``, in arrival order, then ``{"unsigned": n}``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import time

import click
from aiohttp import web

from horologe.client import verify_signature


class Pushes:
    """What arrived: (arrival ms, id, deliver_at) of each signed push, the ids, the unsigned."""

    def __init__(self, secret: str, expect: int) -> None:
        self.secret = secret
        self.expect = expect
        self.got: list[tuple[float, str, int]] = []
        self.ids: set[str] = set()
        self.unsigned = 0
        self.done = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        at = time.time() * 1000
        if not verify_signature(self.secret, request.headers.get("Horologe-Signature"), raw):
            self.unsigned += 1
            return web.Response(status=401)
        msg = json.loads(raw)
        self.got.append((at, msg["id"], msg["deliver_at"]))
        self.ids.add(msg["id"])
        if len(self.ids) >= self.expect:
            self.done.set()
        return web.Response(text="ok")

    def write(self, path: str) -> None:
        with open(path, "w") as f:
            for row in self.got:
                f.write(json.dumps(row) + "\n")
            f.write(json.dumps({"unsigned": self.unsigned}) + "\n")


async def receive(secret: str, expect: int, out: str) -> None:
    pushes = Pushes(secret, expect)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, pushes.done.set)
    app = web.Application()
    app.router.add_post("/hook", pushes.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    gc.collect()
    gc.freeze()
    port = site._server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}/hook", flush=True)
    await pushes.done.wait()
    pushes.write(out)
    await runner.cleanup()


@click.command()
@click.option("--secret", required=True, help="the subscription's signing secret")
@click.option("--expect", type=click.IntRange(min=1), required=True, help="stop once this many ids arrived")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="where to write what arrived")
def main(secret: str, expect: int, out: str) -> None:
    """Receive signed pushes on 127.0.0.1 until --expect distinct ids arrived; write them to --out."""
    asyncio.run(receive(secret, expect, out))


if __name__ == "__main__":
    main()
