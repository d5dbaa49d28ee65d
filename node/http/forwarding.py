"""``Horologe-Forward-To``: a request sent on to another node of the cluster, its answer returned.

The dashboard (node/http/ui/) is served by every node and talks only to the node it was loaded
from. The other nodes listen on other ports, so they are other origins to a browser: a
call to them needs CORS, and a 307 to the master on another origin is followed without
the ``Authorization`` header (the Fetch standard drops it on a cross-origin redirect) and
then refused by CORS anyway. So the page names the node it means in this header
(``master``, or a node id), and its own node forwards the call.

Only to the cluster's own nodes, as configured (no URL comes from the request), and one
hop: the header is not sent on. The caller's own ``Authorization`` goes along, so the
target checks the token as for any call; the node adds no credentials of its own. A
redirect the target answers (it stopped being master meanwhile) comes back as 503
``no_master``, never as a 307 the browser would follow.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from ..ops.log_setup import REQUEST_ID
from .access_log import HEADER as REQUEST_ID_HEADER
from .errors import ApiError

HEADER = "Horologe-Forward-To"
MASTER = "master"
SENT_ON = ("Authorization", "Content-Type", "Accept")
TIMEOUT_S = 40.0  # beyond the longest long poll (wait_ms 30 s) and a release (a few s)


class Forwarder:
    """``target(name)`` is the URL of the node ``name`` means (``master`` or a node id),
    None for this node itself; it raises ApiError when there is none."""

    def __init__(self, target: Callable[[str], str | None], session: aiohttp.ClientSession) -> None:
        self._target = target
        self._session = session

    def url_for(self, request: web.Request) -> str | None:
        """Where the request is to go, or None to serve it here."""
        name = request.headers.get(HEADER)
        return None if name is None else self._target(name.strip())

    async def forward(self, request: web.Request, url: str) -> web.Response:
        headers = {h: request.headers[h] for h in SENT_ON if h in request.headers}
        if REQUEST_ID.get():  # both nodes log the call under one id
            headers[REQUEST_ID_HEADER] = REQUEST_ID.get()
        body = await request.read() if request.can_read_body else None
        try:
            async with self._session.request(
                request.method,
                f"{url}{request.rel_url}",
                data=body,
                headers=headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=TIMEOUT_S),
            ) as answer:
                raw = await answer.read()
                status, kind = answer.status, answer.headers.get("Content-Type")
                location = answer.headers.get("Location", "")
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ApiError(503, "unreachable", f"{url} did not answer: {type(e).__name__} {e}") from e
        if 300 <= status < 400:
            master = urlsplit(location).netloc or "unknown"
            why = f"{url} is not the master (the master is {master}): forward a master-only call to 'master'"
            raise ApiError(503, "no_master", why, leader=None)
        out = web.Response(body=raw, status=status)
        if kind:
            out.headers["Content-Type"] = kind
        return out


def forward_middleware(forwarder: Callable[[], Forwarder | None]):
    """Forward requests that carry the header (after the auth check, which runs outside)."""

    @web.middleware
    async def forward_to_node(request: web.Request, handler):
        fw = forwarder()
        url = None if fw is None else fw.url_for(request)
        if url is None:
            return await handler(request)
        return await fw.forward(request, url)

    return forward_to_node


def cluster_target(
    node_id: str,
    peer_urls: Callable[[], dict[str, str]],
    is_master: Callable[[], bool],
    master_url: Callable[[], str | None],
) -> Callable[[str], str | None]:
    """``target(name)`` for a :class:`Forwarder`: ``master`` is the master's URL (None on
    the master itself; 503 while none is known), a node id that node's (None for this one).
    ``peer_urls()`` maps the other members' ids to their URLs now (the membership changes)."""

    def target(name: str) -> str | None:
        if name == MASTER:
            if is_master():
                return None
            url = master_url()
            if url is None:
                raise ApiError(503, "no_master", "no master is known now; try again", leader=None)
            return url
        if name == node_id:
            return None
        urls = peer_urls()
        if name not in urls:
            known = ", ".join([MASTER, node_id, *urls])
            raise ApiError(422, "unknown_node", f"{HEADER}: no node {name!r} (one of {known})", HEADER)
        return urls[name]

    return target
