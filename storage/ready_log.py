"""Ready log of one topic: what has been delivered, in segments ``ready/<topic_id>.<first>.rdy``.

A segmented log (segments): each segment is the magic ``HZREDY`` v1, then entries of
40 bytes, little-endian. An entry's number is the ready offset that consumer groups
commit against; ``<first>`` is the offset of a segment's first entry, and retention
removes whole segments from the front, so offsets never shift. A segment holds the
deliveries of one hour at most (``ready_segment_span_ms``, by ``delivered_at``; see
Transaction.append_ready). A store written before
ready logs had segments holds one file ``ready/<topic_id>.rdy``: it reads as the
segment that starts at offset 0. Entry::

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
from .segments import Segment, list_segments, segment_rel

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


READY_EXT = "rdy"


def ready_segment_rel(topic_id: int, first: int) -> str:
    return segment_rel("ready", str(topic_id), first, READY_EXT)


def ready_segments(files) -> dict[int, list[Segment]]:
    """Topic id -> the segments of its ready log, ascending (``files``: relpath -> length)."""
    out = {int(stem): segs for stem, segs in list_segments(files, "ready", READY_EXT).items()}
    for rel in files:  # the one-file layout from before segments
        name = rel[len("ready/") :] if rel.startswith("ready/") else ""
        stem, _, ext = name.partition(".")
        if ext == READY_EXT and stem.isdigit():
            out.setdefault(int(stem), []).insert(0, (0, rel))
    return out


def base_key(topic_id: int) -> str:
    """Meta key of the first offset a topic's ready log still holds (absent: 0)."""
    return f"ready_base/{topic_id}"


def floor_key(rel: str) -> str:
    """Meta key of the lowest hour a ready segment's entries name (see Transaction.append_ready)."""
    return f"ready_floor/{rel}"


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


def ready_rows(hour, global_index, tag_sig, deliver_at_ms, delivered_at_ms, attempt=0) -> np.ndarray:
    """Ready-log entries, sealed, from columns (arrays, or scalars shared by every row):
    ``ReadyEntry.pack`` for a whole delivery at once."""
    n = len(global_index)
    rows = np.zeros(n, dtype=READY.dtype)
    rows["hour"] = hour
    rows["global_index"] = global_index
    rows["tag_sig"] = tag_sig
    rows["deliver_at_ms"] = deliver_at_ms
    rows["delivered_at_ms"] = delivered_at_ms
    rows["attempt"] = attempt
    return READY.seal(rows)


def rows_of(entries) -> np.ndarray:
    """Ready-log entries from ``ReadyEntry`` tuples (rows already are returned as they are)."""
    if isinstance(entries, np.ndarray):
        return entries
    cols = list(zip(*entries, strict=True)) or [()] * len(ReadyEntry._fields)
    types = [READY.dtype[name] for name in ReadyEntry._fields]
    return ready_rows(*(np.array(col, dtype=t) for col, t in zip(cols, types, strict=True)))


def ready_ids(rows: np.ndarray) -> list[str]:
    """The message ids of ready-log rows (as read by ``Storage.read_ready``), as strings."""
    return [
        str(MessageId(h, g))
        for h, g in zip(rows["hour"].tolist(), rows["global_index"].tolist(), strict=True)
    ]
