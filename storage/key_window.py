"""Producer keys seen in the last ``window_ms``: ``(topic, key) -> message id``.

It serves idempotent produce (a retried send returns the first id) and cancel-by-key.
Time is the produced_at_ms carried by applied messages, never a clock, so every node
expires the same keys at the same entry. It is bounded twice: by the window, and by
``max_keys`` (oldest evicted first).

Persisted as ``keys/<YYYYMMDDHH>.keys`` by the hour of produced_at: the magic
``HZKEYS`` v1 then frames whose msgpack payloads are ``[topic, key, id, produced_at_ms]``.
On open the files of the last window are replayed; older files are removed.
"""

from __future__ import annotations

from collections import deque

import msgpack

from .delay_index import MS_PER_HOUR
from .framing import frame
from .hour_names import hour_name
from .message_id import MessageId


def key_file(hour: int) -> str:
    return f"keys/{hour_name(hour)}.keys"


def key_record(topic: str, key: str, mid: MessageId, produced_at_ms: int) -> bytes:
    return frame(msgpack.packb([topic, key, str(mid), produced_at_ms], use_bin_type=True))


class KeyWindow:
    def __init__(self, window_ms: int, max_keys: int) -> None:
        self.window_ms = window_ms
        self.max_keys = max_keys
        self.newest_ms = 0
        self._ids: dict[tuple[str, str], tuple[MessageId, int]] = {}
        self._order: deque[tuple[int, str, str]] = deque()

    def __len__(self) -> int:
        return len(self._ids)

    def get(self, topic: str, key: str) -> MessageId | None:
        hit = self._ids.get((topic, key))
        if hit is None or hit[1] < self.newest_ms - self.window_ms:
            return None
        return hit[0]

    def add(self, topic: str, key: str, mid: MessageId, produced_at_ms: int) -> None:
        self._ids[(topic, key)] = (mid, produced_at_ms)
        self._order.append((produced_at_ms, topic, key))
        self.newest_ms = max(self.newest_ms, produced_at_ms)
        self._expire()

    def _expire(self) -> None:
        horizon = self.newest_ms - self.window_ms
        order, ids = self._order, self._ids
        while order and (order[0][0] < horizon or len(ids) > self.max_keys):
            at, topic, key = order.popleft()
            hit = ids.get((topic, key))
            if hit is not None and hit[1] == at:
                del ids[(topic, key)]

    def oldest_hour_kept(self) -> int:
        """Key files of hours before this one hold only expired keys."""
        return (self.newest_ms - self.window_ms) // MS_PER_HOUR
