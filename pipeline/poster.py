"""Posting validated messages to the cluster in batches, with retries. Pure: no Spark.

Every message carries a key, so a batch that is posted twice (a retry after a timeout,
a Spark task run again, the whole job rerun while the keys live: until 24 h after each
message's delivery hour) stores nothing new.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from horologe.client import Client, HorologeError, UnavailableError

from .errors import PostingError


@dataclass
class PostStats:
    accepted: int = 0
    refused: int = 0  # refused by the server (should not happen after validation)
    retried: int = 0  # batches posted again after a failure

    def add(self, other: PostStats) -> None:
        self.accepted += other.accepted
        self.refused += other.refused
        self.retried += other.retried


def post_messages(
    messages: Iterable[dict],
    urls: list[str],
    token: str,
    *,
    batch_size: int = 1000,
    attempts: int = 8,
    backoff_s: float = 0.5,
    ca: str | None = None,
) -> PostStats:
    """Post in batches; each batch is retried up to ``attempts`` times across failovers.
    ``ca``: the CA file to verify https:// nodes with (it must be readable where this runs)."""
    client = Client(urls, token, retry_s=10.0, ca=ca)
    stats = PostStats()
    batch: list[dict] = []

    def flush() -> None:
        for attempt in range(attempts):
            try:
                results = client.produce_batch(batch)
                break
            except UnavailableError as e:
                if attempt == attempts - 1:
                    raise PostingError(
                        f"batch of {len(batch)} not posted after {attempts} attempts: {e}"
                    ) from e
                stats.retried += 1
                time.sleep(backoff_s * (attempt + 1))
        for r in results:
            if isinstance(r, HorologeError):
                stats.refused += 1
            else:
                stats.accepted += 1
        batch.clear()

    with client:  # closes its connections
        for msg in messages:
            batch.append(msg)
            if len(batch) >= batch_size:
                flush()
        if batch:
            flush()
    return stats
