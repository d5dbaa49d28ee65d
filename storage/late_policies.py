"""Lateness policies and their outcomes for one hour (file ``<hour>.late``).

A message may say how late it may be delivered (``max_lateness``) and what happens past
that (``on_late``: ``deliver``, ``dlq`` or ``drop``). The record keeps both as headers
that only the node sets (``x-horologe-max-lateness``, ms, and ``x-horologe-on-late``),
so copies (retries, reschedules) carry them; a message whose policy is not ``deliver``
also gets an entry here when stored, so that a delivery finds its policy without
decoding the record. When it falls due too late, a second entry records what was done::

    global_index  u32   the message of this hour
    kind          u32   0 DROP_AFTER, 1 DLQ_AFTER: its policy, with ``ms`` its max_lateness
                        2 DROPPED, 3 DEAD_LETTERED: what was done, ``ms`` how late it was
    ms            i64
    crc           u32   crc32 of the 16 bytes above
"""

from __future__ import annotations

import struct

import numpy as np

from .fixed_records import FixedLayout

LATE = FixedLayout(
    struct.Struct("<IIq"),
    np.dtype([("global_index", "<u4"), ("kind", "<u4"), ("ms", "<i8"), ("crc", "<u4")]),
)
assert LATE.size == 20

DROP_AFTER, DLQ_AFTER, DROPPED, DEAD_LETTERED = 0, 1, 2, 3
POLICY_KINDS = {"drop": DROP_AFTER, "dlq": DLQ_AFTER}

MAX_LATENESS_HEADER = "x-horologe-max-lateness"
ON_LATE_HEADER = "x-horologe-on-late"
ON_LATE = ("deliver", "dlq", "drop")


def policy_headers(max_lateness_ms: int, on_late: str) -> dict[str, str]:
    return {MAX_LATENESS_HEADER: str(max_lateness_ms), ON_LATE_HEADER: on_late}


def policy_of(headers: dict[str, str]) -> tuple[int, int] | None:
    """(kind, max_lateness_ms) of a message's headers when its policy is to drop or
    dead-letter it once late; None when it is delivered however late."""
    kind = POLICY_KINDS.get(headers.get(ON_LATE_HEADER, "deliver"))
    if kind is None:
        return None
    return kind, int(headers[MAX_LATENESS_HEADER])
