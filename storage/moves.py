"""Reschedules that touch one hour (file ``<hour>.move``): where a message went, and
whose copy a message is.

A rescheduled message keeps its id, since users store ids to look a message up or cancel
it. Its record stays where the id says, tombstoned like a cancel, and a copy is stored at
the new time; two entries link them, so the id answers for the copy::

    global_index  u32   the message of this hour that the entry is about
    kind          u32   MOVED_TO (0): it lives now at (hour, other)
                        COPY_OF (1): it is a copy of (hour, other), and answers to that id
    hour          u32   the other message's hour ...
    other         u32   ... and globalIndex
    crc           u32   crc32 of the 16 bytes above

A MOVED_TO entry is only ever written in the hour of the id users hold (the original),
so one look-up finds the live copy however often it moved: the last MOVED_TO entry of a
message wins. A COPY_OF entry is written in the copy's hour and names the original.
The file outlives its hour's log and index while a MOVED_TO entry in it still points at
an hour retention keeps (Transaction.drop_hours_before).
"""

from __future__ import annotations

import struct

import numpy as np

from .fixed_records import FixedLayout

MOVE = FixedLayout(
    struct.Struct("<IIII"),
    np.dtype(
        [
            ("global_index", "<u4"),
            ("kind", "<u4"),
            ("hour", "<u4"),
            ("other", "<u4"),
            ("crc", "<u4"),
        ]
    ),
)
assert MOVE.size == 20

MOVED_TO = 0
COPY_OF = 1
