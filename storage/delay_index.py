"""Delay index entry: one per message of an hour, in arrival order (file ``<hour>.idx``).

The entry number is the message's **globalIndex**. Layout, 40 bytes, little-endian::

    offset            u64   where the record's frame starts in <hour>.log
    size              u32   the frame's length in bytes
    local_index       u32   the message's ordinal within its second (0, 1, 2, ...)
    pre_global_index  i32   previous entry of the same second, or -1: each second
                            is a reverse-linked list whose head is in <hour>.heads
    second_of_hour    u16   0..3599: the slot the message is scheduled in
    ms                u16   0..999: millisecond within that second
    tag_sig           u64   OR of the tags' Bloom signatures (tag_signature)
    topic_id          u32   the topic's number in the commit journal's registry
    crc               u32   crc32 of the 36 bytes above (the design's spare bytes)

The slot ``(second_of_hour, ms)`` equals the message's ``deliver_at_ms`` unless the
message arrived late, after its second had fired: then it was filed at the delivery
watermark and is due at once; the record keeps the original ``deliver_at_ms``.
"""

from __future__ import annotations

import struct

import numpy as np

from .fixed_records import FixedLayout

INDEX = FixedLayout(
    struct.Struct("<QIIiHHQI"),
    np.dtype(
        [
            ("offset", "<u8"),
            ("size", "<u4"),
            ("local_index", "<u4"),
            ("pre_global_index", "<i4"),
            ("second_of_hour", "<u2"),
            ("ms", "<u2"),
            ("tag_sig", "<u8"),
            ("topic_id", "<u4"),
            ("crc", "<u4"),
        ]
    ),
)
assert INDEX.size == 40

SECONDS_PER_HOUR = 3600
MS_PER_HOUR = SECONDS_PER_HOUR * 1000


def slot_ms(hour: int, entries):
    """The epoch ms an entry (or a numpy array of them) is filed at: its slot."""
    return (
        hour * MS_PER_HOUR
        + entries["second_of_hour"].astype(np.int64) * 1000
        + entries["ms"].astype(np.int64)
    )
