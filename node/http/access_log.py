"""Request ids and the access log: the outermost middleware of the node's app.

Every answer carries ``X-Request-Id``: the caller's own, when it sent a sane one (1-64
of ``A-Z a-z 0-9 . _ : -``), else a fresh random one. While the request runs, the id is
in :data:`~horologe.node.ops.log_setup.REQUEST_ID`, so whatever is logged on its behalf
carries it. With the access log on, one line per request on ``horologe.access``:
method, path (never the query or headers, which may carry keys or tokens), status,
time taken, caller and request id. A caller that hung up before the answer shows 499.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time

from aiohttp import web

from ..ops.log_setup import REQUEST_ID

HEADER = "X-Request-Id"
GIVEN_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,64}")
CLIENT_CLOSED = 499

access = logging.getLogger("horologe.access")


def request_ids(log_requests: bool):
    """The middleware: an id for each request, in its answer and its log lines."""

    @web.middleware
    async def middleware(request: web.Request, handler):
        given = request.headers.get(HEADER, "")
        rid = given if GIVEN_ID_RE.fullmatch(given) else secrets.token_hex(8)
        token = REQUEST_ID.set(rid)
        started = time.perf_counter()
        status = 500  # what aiohttp answers for an exception no middleware turned into an answer
        try:
            response = await handler(request)
            status = response.status
            response.headers[HEADER] = rid
            return response
        except web.HTTPException as e:  # redirects, and aiohttp's own refusals
            status = e.status
            e.headers[HEADER] = rid
            raise
        except asyncio.CancelledError:
            status = CLIENT_CLOSED
            raise
        finally:
            if log_requests:
                ms = (time.perf_counter() - started) * 1000
                access.info(
                    "%s %s %d %.1f ms from %s id %s",
                    request.method,
                    request.path,
                    status,
                    ms,
                    request.remote,
                    rid,
                    extra={
                        "method": request.method,
                        "path": request.path,
                        "status": status,
                        "ms": round(ms, 3),
                        "peer": request.remote,
                    },
                )
            REQUEST_ID.reset(token)

    return middleware
