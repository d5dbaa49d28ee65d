"""Posting validated messages to the cluster in batches, with retries. Pure: no Spark.

Every message carries a key, so a batch that is posted twice (a retry after a timeout,
a Spark task run again, the whole job rerun while the keys live: until 24 h after each
message's delivery hour) stores nothing new.

A :class:`Poster` takes messages one by one and posts each full batch on a thread of
its own, one batch in flight, while the caller validates the next: batches still go in
the order their messages came.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from horologe.client import Client, HorologeError, InvalidRequestError, ServerError, UnavailableError

from .errors import PostingError

# A batch is sent once it holds this many bytes of bodies, keys and tags, under a node's
# default request limit (max_request_bytes, 4 MiB) with room for the rest of each item.
BATCH_BYTES = 3 * 1024 * 1024
ITEM_BYTES = 64  # the rest of an item (field names, topic, time), as counted for BATCH_BYTES


@dataclass
class PostStats:
    accepted: int = 0
    refused: int = 0  # refused by the server (should not happen after validation)
    retried: int = 0  # batches posted again after a failure


class Poster:
    """Messages in, batches of ``batch_size`` (or ``BATCH_BYTES``) out; each batch is
    retried up to ``attempts`` times across failovers and a node's own failures (5xx),
    else :class:`PostingError` (raised by the ``add`` or ``close`` that follows); a batch
    over a node's limits (413: its ``max_batch_items`` or ``max_request_bytes``) is posted
    in halves. ``ca``: the CA file to verify https:// nodes with (it must be readable
    where this runs). A context manager: leaving it normally posts what is left; leaving it
    on an exception does not. The messages the server refused, with its reasons, gather in
    :attr:`refusals` (any thread may take them)."""

    def __init__(
        self,
        urls: list[str],
        token: str,
        *,
        batch_size: int = 1000,
        attempts: int = 8,
        backoff_s: float = 0.5,
        ca: str | None = None,
    ) -> None:
        self.stats = PostStats()  # final once close() returned
        self.refusals: deque[tuple[dict, str]] = deque()
        self._client = Client(urls, token, retry_s=10.0, ca=ca)
        self._batch_size = batch_size
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._batch: list[dict] = []
        self._bytes = 0
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="horologe-poster")
        self._in_flight: Future | None = None

    def add(self, message: dict) -> None:
        self._batch.append(message)
        self._bytes += _size(message)
        if len(self._batch) >= self._batch_size or self._bytes >= BATCH_BYTES:
            self._send()

    def close(self) -> PostStats:
        try:
            if self._batch:
                self._send()
            self._settle()
        finally:
            self._thread.shutdown()
            self._client.close()
        return self.stats

    def __enter__(self) -> Poster:
        return self

    def __exit__(self, kind, *_exc) -> None:
        if kind is None:
            self.close()
        else:
            self._thread.shutdown(cancel_futures=True)
            self._client.close()

    def _send(self) -> None:
        batch, self._batch, self._bytes = self._batch, [], 0
        self._settle()
        self._in_flight = self._thread.submit(self._post, batch)

    def _settle(self) -> None:
        """Wait for the batch in flight; raise what it raised."""
        if self._in_flight is not None:
            done, self._in_flight = self._in_flight, None
            done.result()

    def _post(self, batch: list[dict]) -> None:  # on the poster's thread
        for attempt in range(self._attempts):
            try:
                results = self._client.produce_batch(batch)
                break
            except InvalidRequestError as e:
                if e.status != 413:
                    raise
                if len(batch) == 1:  # one message over a node's request limit
                    self._refused(batch, [e])
                    return
                half = len(batch) // 2
                self._post(batch[:half])
                self._post(batch[half:])
                return
            except (UnavailableError, ServerError) as e:
                if attempt == self._attempts - 1:
                    raise PostingError(
                        f"batch of {len(batch)} not posted after {self._attempts} attempts: {e}"
                    ) from e
                self.stats.retried += 1
                time.sleep(self._backoff_s * (attempt + 1))
        refused = [i for i, r in enumerate(results) if isinstance(r, HorologeError)]
        self._refused([batch[i] for i in refused], [results[i] for i in refused])
        self.stats.accepted += len(results) - len(refused)

    def _refused(self, messages, errors) -> None:
        self.stats.refused += len(messages)
        why = (f"refused by the server: {e}" for e in errors)
        self.refusals.extend(zip(messages, why, strict=True))


def _size(message: dict) -> int:
    """What a message adds to a batch's request, near enough (BATCH_BYTES: text counted by
    its characters; a batch that still comes out over a node's limit is posted in halves)."""
    tags = message.get("tags") or ()
    return len(message["body"]) + len(message.get("key") or "") + sum(map(len, tags)) + ITEM_BYTES


def post_messages(messages: Iterable[dict], urls: list[str], token: str, **options) -> PostStats:
    """Post ``messages`` with a :class:`Poster` (``options``: its keyword arguments); its figures."""
    with Poster(urls, token, **options) as poster:
        for message in messages:
            poster.add(message)
    return poster.stats
