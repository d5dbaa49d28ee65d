"""Ready log of one topic (file ``ready/<topic_id>.rdy``): what has been delivered.

Append-only entries of 40 bytes, little-endian; the entry number is the ready offset
that consumer groups commit against::

    hour              u32   the message id's hour ...
    global_index      u32   ... and globalIndex: the body stays in the delay log
    tag_sig           u64   copied from the index so tag filters scan one file
    deliver_at_ms     i64   what the producer asked for
    delivered_at_ms   i64   the master's clock in the entry that delivered it
    attempt           u16   0 first time, +1 per retry
    reserved          u16   zero
    crc               u32   crc32 of the 36 bytes above
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

from .fixed_records import FixedLayout
from .message_id import MessageId

READY = FixedLayout(
    struct.Struct("<IIQqqHH"),
    np.dtype(
        [
            ("hour", "<u4"),
            ("global_index", "<u4"),
            ("tag_sig", "<u8"),
            ("deliver_at_ms", "<i8"),
            ("delivered_at_ms", "<i8"),
            ("attempt", "<u2"),
            ("reserved", "<u2"),
            ("crc", "<u4"),
        ]
    ),
)
assert READY.size == 40


class ReadyEntry(NamedTuple):
    hour: int
    global_index: int
    tag_sig: int
    deliver_at_ms: int
    delivered_at_ms: int
    attempt: int = 0

    def pack(self) -> bytes:
        return READY.pack(
            self.hour,
            self.global_index,
            self.tag_sig,
            self.deliver_at_ms,
            self.delivered_at_ms,
            self.attempt,
            0,
        )


def ready_ids(rows: np.ndarray) -> list[str]:
    """The message ids of ready-log rows (as read by ``Storage.read_ready``), as strings."""
    return [
        str(MessageId(h, g))
        for h, g in zip(rows["hour"].tolist(), rows["global_index"].tolist(), strict=True)
    ]
