"""Serve the HTTP API with a bound on open connections; aiohttp's ``run_app`` has none.

Every connection holds a file descriptor, and so do the store's files and the Raft
links. A client that opens connections without end (a flood, a leak) would otherwise
take the last descriptor from the store or a reconnecting peer. Past
``max_connections``, a new connection is answered 503 ``too_many_connections`` and
closed; the node's own descriptors stay within reach.

A connection counts from its accept to its close, a TLS handshake included. A handshake
that fails is not reported to the application, so it counts until the handshake
timeout has surely closed it. A refused connection lingers up to ``LINGER_S`` so that
the 503 is read, not lost to a reset from closing on an unread request; at most
``MAX_LINGERING`` linger at once, and beyond that a refused connection is reset at once.

The loop is run as aiohttp's ``run_app`` runs it: the app's startup and shutdown
hooks, a ``GracefulExit`` (raised by a signal handler) that ends it, then every task
cancelled and the loop closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import ssl
import time

import orjson
from aiohttp import web

from horologe.storage.config import StorageConfig

from ..errors import ListenError
from .errors import error_body

log = logging.getLogger(__name__)

HANDSHAKE_S = 10.0  # a TLS client must finish its handshake this soon
LINGER_S = 1.0
MAX_LINGERING = 64
BACKLOG = 128
# Descriptors the node needs beside its connections: the store writer's and reader's open
# files, then journals, Raft links, logs and refused connections lingering.
RESERVED_FDS = 2 * StorageConfig().max_open_files + 64 + MAX_LINGERING


def _busy_answer(max_connections: int) -> bytes:
    body = orjson.dumps(
        error_body(
            "too_many_connections",
            f"this node has {max_connections} connections open; try again or another node",
        )
    )
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Retry-After: 1\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


class ConnectionGate:
    """The listener's protocol factory: aiohttp's handler for a connection within the
    bound, a :class:`_Refused` past it. Owns the count of open connections."""

    def __init__(self, server: web.Server, max_connections: int, handshake_s: float | None) -> None:
        self.server, self.max_connections = server, max_connections
        self.answer = _busy_answer(max_connections)
        self.handshake_s = handshake_s  # None: no TLS, connection_made follows the accept
        self.connected = 0
        self.accepted: dict[_Counted, float] = {}  # not yet connected -> until when to count it
        self.lingering = 0

    @property
    def open(self) -> int:
        now = time.monotonic()
        for conn, until in list(self.accepted.items()):
            if until < now:  # its handshake failed and timed out: asyncio closed it
                del self.accepted[conn]
        return self.connected + len(self.accepted)

    def __call__(self) -> asyncio.BaseProtocol:
        if self.open >= self.max_connections:
            return _Refused(self)
        conn = _Counted(self, self.server())
        until = time.monotonic() + (self.handshake_s or 0.0) + 1.0
        self.accepted[conn] = until
        return conn


class _Counted(asyncio.Protocol):
    """aiohttp's request handler, counted by its gate while its connection is open."""

    def __init__(self, gate: ConnectionGate, handler: asyncio.Protocol) -> None:
        self.gate, self.handler = gate, handler

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.gate.accepted.pop(self, None)  # gone already if its handshake outlived the wait
        self.gate.connected += 1
        self.handler.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.gate.connected -= 1
        self.handler.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self.handler.data_received(data)

    def eof_received(self) -> bool | None:
        return self.handler.eof_received()

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()


class _Refused(asyncio.Protocol):
    """A connection past the bound: the 503, then a close once the client has read it."""

    def __init__(self, gate: ConnectionGate) -> None:
        self.gate = gate
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.gate.lingering >= MAX_LINGERING:
            transport.abort()  # type: ignore[attr-defined]
            return
        self.gate.lingering += 1
        self.transport.write(self.gate.answer)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        # Then dropped: a TLS close would wait up to 30 s for the client's close_notify.
        self.timer = asyncio.get_running_loop().call_later(LINGER_S, self.transport.abort)

    def data_received(self, data: bytes) -> None:
        pass  # the request is not read: whatever it is, the answer is 503

    def eof_received(self) -> bool:
        return False  # the client has read and closed: close our end too

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
            self.gate.lingering -= 1


def connection_bound(wanted: int) -> int:
    """``wanted``, or fewer if the descriptor limit leaves less beside ``RESERVED_FDS``.

    The soft limit is raised to the hard one first, as far as the process may."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    room = soft - RESERVED_FDS if soft != resource.RLIM_INFINITY else wanted
    if room < wanted:
        log.warning(
            "http_max_connections %d lowered to %d: %d file descriptors allowed, %d kept for "
            "the store, Raft and refused connections",
            wanted,
            max(room, 1),
            soft,
            RESERVED_FDS,
        )
    return max(1, min(wanted, room))


async def _serve(
    app: web.Application,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None,
    max_connections: int,
    runner_args: dict,
) -> None:
    runner = web.AppRunner(app, handle_signals=False, **runner_args)
    await runner.setup()
    try:
        handshake_s = HANDSHAKE_S if ssl_context else None
        try:
            listener = await asyncio.get_running_loop().create_server(
                ConnectionGate(runner.server, max_connections, handshake_s),
                host,
                port,
                ssl=ssl_context,
                ssl_handshake_timeout=handshake_s,
                reuse_address=True,
                backlog=BACKLOG,
            )
        except OSError as e:
            why = os.strerror(e.errno) if e.errno else str(e)
            raise ListenError(f"cannot listen for HTTP on {host}:{port}: {why}") from e
        log.info("serving the HTTP API on %s://%s:%s", "https" if ssl_context else "http", host, port)
        try:
            await asyncio.Future()  # until GracefulExit or cancellation
        finally:
            listener.close()
    finally:
        await runner.cleanup()


def stop_serving() -> None:
    """End :func:`serve` gracefully: called on its loop, it stops the app as aiohttp's own
    signal handlers would (``web.GracefulExit``)."""
    raise web.GracefulExit()


def serve(
    app: web.Application,
    *,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None,
    max_connections: int,
    **runner_args,
) -> None:
    """Run ``app`` until ``web.GracefulExit``; ``runner_args`` go to ``web.AppRunner``."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    main = loop.create_task(_serve(app, host, port, ssl_context, max_connections, runner_args))
    try:
        loop.run_until_complete(main)
    except (web.GracefulExit, KeyboardInterrupt):
        pass
    finally:
        try:
            if not main.done():
                main.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    loop.run_until_complete(main)
        finally:
            _cancel_the_rest(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            asyncio.set_event_loop(None)
            loop.close()


def _cancel_the_rest(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel every task still pending; report any that ended in an error meanwhile."""
    rest = asyncio.all_tasks(loop)
    for task in rest:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*rest, return_exceptions=True))
    for task in rest:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "a task ended in an error while the node stopped",
                    "exception": task.exception(),
                    "task": task,
                }
            )
