"""Serve the HTTP API with a bound on open connections; aiohttp's ``run_app`` has none.

Every connection holds a file descriptor, and so do the store's files and the Raft
links. A client that opens connections without end (a flood, a leak) would otherwise
take the last descriptor from the store or a reconnecting peer. Past
``max_connections``, a new connection gets a 503 ``too_many_connections`` at once,
unread, and is closed; the node's own descriptors stay within reach.

The bound is checked against aiohttp's count of open connections, which asyncio updates
one loop turn after it accepts: a burst may pass the bound by at most one turn's accepts,
``BACKLOG``.

The loop is run as aiohttp's ``run_app`` runs it: the app's startup and shutdown
hooks, a ``GracefulExit`` (raised by a signal handler) that ends it, then every task
cancelled and the loop closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import ssl
from collections.abc import Callable

import orjson
from aiohttp import web

log = logging.getLogger(__name__)

# Descriptors the node needs beside its connections: the store writer's and reader's open
# files (storage/config.py max_open_files, 256 each), its journals, Raft links, logs.
RESERVED_FDS = 640
BACKLOG = 128  # the listen queue, and the most connections asyncio accepts in one loop turn


def _busy_answer(max_connections: int) -> bytes:
    body = orjson.dumps(
        {
            "error": {
                "code": "too_many_connections",
                "message": f"this node has {max_connections} connections open; try again or another node",
            }
        }
    )
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Retry-After: 1\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


class _Busy(asyncio.Protocol):
    """A connection past the bound: the 503, then the close, nothing read."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(self.answer)  # type: ignore[attr-defined]
        transport.close()


def bounded(server: web.Server, max_connections: int) -> Callable[[], asyncio.BaseProtocol]:
    """A protocol factory: ``server``'s handler while fewer than ``max_connections`` are
    open, else one that answers 503 and closes."""
    answer = _busy_answer(max_connections)

    def accept() -> asyncio.BaseProtocol:
        if len(server.connections) < max_connections:
            return server()
        return _Busy(answer)

    return accept


def connection_bound(wanted: int) -> int:
    """``wanted``, or fewer if the descriptor limit leaves less beside ``RESERVED_FDS``
    and one burst of accepts (``BACKLOG``).

    The soft limit is raised to the hard one first, as far as the process may."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    room = soft - RESERVED_FDS - BACKLOG if soft != resource.RLIM_INFINITY else wanted
    if room < wanted:
        log.warning(
            "http_max_connections %d lowered to %d: %d file descriptors allowed, %d kept for "
            "the store, Raft and one burst of accepts",
            wanted,
            max(room, 1),
            soft,
            RESERVED_FDS + BACKLOG,
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
        listener = await asyncio.get_running_loop().create_server(
            bounded(runner.server, max_connections),
            host,
            port,
            ssl=ssl_context,
            reuse_address=True,
            backlog=BACKLOG,
        )
        try:
            await asyncio.Future()  # until GracefulExit or cancellation
        finally:
            listener.close()
    finally:
        await runner.cleanup()


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
            rest = asyncio.all_tasks(loop)
            for task in rest:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*rest, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
