"""What a peer says of itself: its ``/readyz``, read over HTTP during a forced release.

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
