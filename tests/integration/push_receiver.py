"""A real HTTP receiver of pushes, on 127.0.0.1 in a thread of its own: aiohttp, as a user's
web service would be. It checks every request's signature with the SDK's
``verify_signature``, records what came, how many requests were open at once, and answers
as ``answer(push) -> Reply`` says: a status, a Retry-After, a delay before answering
(longer than the subscription's ``timeout_ms``: a timeout)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from horologe.client import verify_signature


@dataclass(frozen=True)
class Reply:
    status: int = 200
    delay_s: float = 0.0
    retry_after: str | None = None


@dataclass
class Push:
    id: str
    attempt: int
    header_attempt: str
    topic: str
    body: str | None
    signed: bool  # verify_signature said yes
    at: float  # time.monotonic() when it arrived
    deliver_at: int  # the message's, ms
    arrived_ms: float  # the wall clock when it arrived
    deliveries: int  # the body's: hand-outs of this attempt, this one counted
    header_deliveries: str


@dataclass
class Receiver:
    secret: str
    answer: Callable[[Push], Reply] = lambda push: Reply()
    pushes: list[Push] = field(default_factory=list)
    open_now: int = 0
    most_open: int = 0
    port: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> Receiver:
        self._thread.start()
        assert self._ready.wait(10), "the receiver did not start"
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(10)

    def _serve(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        msg = json.loads(raw)
        push = Push(
            request.headers.get("Horologe-Message-Id", ""),
            msg["attempt"],
            request.headers.get("Horologe-Attempt", ""),
            msg["topic"],
            msg.get("body"),
            verify_signature(self.secret, request.headers.get("Horologe-Signature"), raw),
            time.monotonic(),
            msg["deliver_at"],
            time.time() * 1000,
            msg["deliveries"],
            request.headers.get("Horologe-Deliveries", ""),
        )
        assert push.id == msg["id"], (push.id, msg)
        with self._lock:
            self.pushes.append(push)
            self.open_now += 1
            self.most_open = max(self.most_open, self.open_now)
        try:
            reply = self.answer(push)
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            headers = {} if reply.retry_after is None else {"Retry-After": reply.retry_after}
            return web.Response(status=reply.status, text="ok", headers=headers)
        finally:
            with self._lock:
                self.open_now -= 1

    def got(self, topic: str | None = None) -> list[Push]:
        with self._lock:
            return [p for p in self.pushes if topic is None or p.topic == topic]

    def ids(self, topic: str | None = None) -> set[str]:
        return {p.id for p in self.got(topic)}
