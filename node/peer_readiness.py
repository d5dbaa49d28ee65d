"""What a peer says of itself: its ``/readyz``, read over HTTP during a forced release, and
from a node about to be added to the membership (it must be running first).

A release must not hand the wheel to a node that some follower cannot hear (docs/cluster.md,
"Links and releases"), and only the candidate knows which links it has, so the master asks.
"""

from __future__ import annotations

import logging

import aiohttp

log = logging.getLogger(__name__)


async def peer_readiness(session: aiohttp.ClientSession, url: str, timeout_s: float) -> dict | None:
    """The ``/readyz`` body of the peer at ``url`` (``http(s)://host:port``), or None when
    it does not answer in time. Over HTTPS, a certificate the session's context does not
    verify is no answer (logged, since a wrong ``tls_ca`` looks like a dead peer)."""
    try:
        async with session.get(f"{url}/readyz", timeout=aiohttp.ClientTimeout(total=timeout_s)) as r:
            return await r.json()
    except aiohttp.ClientSSLError as e:
        log.warning("%s: TLS failed (is tls_ca the CA that signed its certificate?): %s", url, e)
        return None
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None


async def readiness_at(url: str, ssl, timeout_s: float = 2.0) -> dict | None:
    """:func:`peer_readiness` of one node, over a session of its own (``ssl``: the context
    peers' certificates are verified with)."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl)) as session:
        return await peer_readiness(session, url, timeout_s)
