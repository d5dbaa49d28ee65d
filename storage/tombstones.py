"""Cancel tombstones of one hour (file ``<hour>.tomb``).

Append-only entries of 8 bytes, little-endian::

    global_index  u32   the cancelled message
    crc           u32   crc32 of the 4 bytes above

In memory they become a bitmap indexed by globalIndex, loaded when the hour is first
asked about, and checked when a message is delivered.
"""

from __future__ import annotations

import struct

import numpy as np

from .fixed_records import FixedLayout

TOMBSTONE = FixedLayout(struct.Struct("<I"), np.dtype([("global_index", "<u4"), ("crc", "<u4")]))
assert TOMBSTONE.size == 8
