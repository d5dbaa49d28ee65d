"""The delivery watermark: how far delivery has gone, as one comparable key.

Every stored message has a key ``(slot_ms, local_index)``: the millisecond it is filed
at (its deliver_at, see storage.delay_index) and its ordinal within its second. The
watermark ``W = (ms, local_index)`` means *every message whose key is <= W has been
delivered*. ``local_index == ALL`` means every message at ``ms``, including ones that
arrive later. Inserts never change an existing key, so the delivered set of a W never
shifts, and a hot millisecond can be released in bounded batches.

On the wire (DESIGN §2, ``ws``) it is ``{tick, local_index, ms}`` with ``tick`` the
epoch second of ``ms`` and ``local_index = -1`` for ALL.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from horologe.storage.delay_index import MS_PER_HOUR

from .errors import InvalidWatermarkError

ALL = 0xFFFF_FFFF


class Watermark(NamedTuple):
    ms: int
    local_index: int = ALL

    @property
    def tick(self) -> int:
        return self.ms // 1000

    @property
    def hour(self) -> int:
        return self.ms // MS_PER_HOUR

    def passed(self, slot_ms: int) -> bool:
        """Whether a message arriving now for ``slot_ms`` is already behind the watermark.

        A new arrival has the highest localIndex of its second, so it is behind W
        exactly when its slot is earlier than W, or equal to it with W covering ALL.
        """
        return slot_ms < self.ms or (slot_ms == self.ms and self.local_index == ALL)

    def passed_many(self, slots_ms: np.ndarray) -> np.ndarray:
        """:meth:`passed` of each slot of an array."""
        return (slots_ms < self.ms) | ((slots_ms == self.ms) & (self.local_index == ALL))

    def sealed_before_hour(self) -> int:
        """Hours before this one hold only delivered messages (one ms of margin, so a
        late arrival filed at the sealed boundary still sorts behind W)."""
        return max(0, (self.ms - 1) // MS_PER_HOUR)

    def late_slot(self, deliver_at_ms: int) -> int:
        """Where to file a message that arrives behind W: its own time, or the first
        unsealed millisecond when its hour is sealed. Either way its key is <= W."""
        return max(deliver_at_ms, self.sealed_before_hour() * MS_PER_HOUR)

    def late_slots(self, deliver_at_ms: np.ndarray) -> np.ndarray:
        """:meth:`late_slot` of each time of an array."""
        return np.maximum(deliver_at_ms, self.sealed_before_hour() * MS_PER_HOUR)

    def to_wire(self) -> dict:
        li = -1 if self.local_index == ALL else self.local_index
        return {"tick": self.tick, "local_index": li, "ms": self.ms}

    @classmethod
    def from_wire(cls, ws: dict) -> Watermark:
        try:
            ms, li, tick = int(ws["ms"]), int(ws["local_index"]), int(ws["tick"])
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidWatermarkError(f"malformed wheel state {ws!r}") from e
        if ms < 0 or li < -1 or li > ALL or tick != ms // 1000:
            raise InvalidWatermarkError(f"inconsistent wheel state {ws!r}")
        return cls(ms, ALL if li == -1 else li)
