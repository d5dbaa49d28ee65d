"""What a peer says of itself: its ``/readyz``, read over HTTP during a forced release.

A release must not hand the wheel to a node that some follower cannot hear (docs/cluster.md,
"Links and releases"), and only the candidate knows which links it has, so the master asks.
"""

from __future__ import annotations

import aiohttp


async def peer_readiness(session: aiohttp.ClientSession, http: str, timeout_s: float) -> dict | None:
    """The peer's ``/readyz`` body, or None when it does not answer in time."""
    try:
        async with session.get(f"http://{http}/readyz", timeout=aiohttp.ClientTimeout(total=timeout_s)) as r:
            return await r.json()
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
