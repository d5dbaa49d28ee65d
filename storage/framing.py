"""Length-and-checksum framing shared by the append-only record files.

Every frame is::

    u32 len | payload (len bytes) | u32 crc32(payload) | u32 len      (little-endian)

The trailing copy of ``len`` lets a reader check a frame's end as well as its start.
A scan stops at the first frame that does not check out:

* if that frame runs to (or past) the end of the file, or only zero bytes follow it, it
  is a *torn tail*: the last write was cut short (a power loss can leave an appended
  tail as zeros: the file's size reached the disk, its data did not), and the caller may
  set it aside and truncate;
* otherwise the damage is in the middle of the file and :class:`CorruptLogError` is raised.

Zeros to the end of the file are a torn tail even where they would read as whole frames
(twelve zero bytes: an empty payload, and crc32(b"") is 0): no payload is empty.

The crc32 is zlib's (the same values), computed by zlib-ng, which takes a quarter of
zlib's time for a record of a few hundred bytes: a crc per record is written on every
node and checked on every read of a message.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np
from zlib_ng.zlib_ng import crc32

from .errors import CorruptLogError

FRAME_HEAD = struct.Struct("<I")
FRAME_TAIL = struct.Struct("<II")
FRAME_OVERHEAD = FRAME_HEAD.size + FRAME_TAIL.size
assert FRAME_OVERHEAD == 12
SECTOR = 512  # what a disk writes whole or not at all at a power cut (its smallest, so far)

_pack_head = FRAME_HEAD.pack
_pack_tail = FRAME_TAIL.pack


def frame(payload: bytes) -> bytes:
    """Wrap one payload in its frame."""
    n = len(payload)
    return _pack_head(n) + payload + _pack_tail(crc32(payload), n)


def read_frame(buf: bytes | memoryview, offset: int, path: str) -> bytes:
    """Return the payload of the committed frame at ``offset``; any mismatch is corruption."""
    end = len(buf)
    if offset + FRAME_OVERHEAD > end:
        raise CorruptLogError(path, offset, "frame runs past committed end")
    (n,) = FRAME_HEAD.unpack_from(buf, offset)
    stop = offset + FRAME_HEAD.size + n
    if stop + FRAME_TAIL.size > end:
        raise CorruptLogError(path, offset, "frame length runs past committed end")
    payload = bytes(buf[offset + FRAME_HEAD.size : stop])
    crc, n2 = FRAME_TAIL.unpack_from(buf, stop)
    if n2 != n or crc != crc32(payload):
        raise CorruptLogError(path, offset)
    return payload


def read_frames(
    buf: bytes, starts: np.ndarray, sizes: np.ndarray, path: str, file_at: int
) -> list[memoryview]:
    """The payloads (views into ``buf``) of the frames at ``starts`` (offsets in ``buf``)
    whose whole lengths the caller knows, ``sizes``: ``read_frame`` of each, its lengths
    checked all at once and its crc in one pass. ``file_at``: where ``buf`` starts in the
    file, for the error that names the first bad frame."""
    n = len(starts)
    if n == 0:
        return []
    lengths = sizes - FRAME_OVERHEAD
    fits = (lengths >= 0) & (starts + sizes <= len(buf))
    if not fits.all():
        raise CorruptLogError(path, file_at + int(starts[np.argmin(fits)]), "frame runs past committed end")
    raw = np.frombuffer(buf, dtype=np.uint8)
    firsts = starts + FRAME_HEAD.size
    ends = firsts + lengths
    mv = memoryview(buf)
    payloads = [mv[a:b] for a, b in zip(firsts.tolist(), ends.tolist(), strict=True)]
    crcs = np.fromiter(map(crc32, payloads), dtype=np.uint32, count=n)
    bad = (
        (_u32_at(raw, starts) != lengths) | (_u32_at(raw, ends) != crcs) | (_u32_at(raw, ends + 4) != lengths)
    )
    if bad.any():
        raise CorruptLogError(path, file_at + int(starts[np.argmax(bad)]))
    return payloads


def _u32_at(raw: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The little-endian u32 at each offset ``at`` of byte array ``raw``."""
    return raw[at[:, None] + np.arange(4)].view("<u4").ravel()


def scan_frames(buf: bytes | memoryview, start: int, path: str) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, payload)`` for each good frame from ``start``.

    Stops silently at a torn tail (the caller learns where from the last offset it
    saw); raises :class:`CorruptLogError` for a bad frame that is followed by more data,
    and for a length that runs past the end with a whole frame after it (damaged, not
    torn: a torn last frame holds nothing whole).
    """
    end = len(buf)
    offset = start
    while offset < end:
        if offset + FRAME_OVERHEAD > end:
            return  # torn: not even a whole empty frame left
        (n,) = FRAME_HEAD.unpack_from(buf, offset)
        if n == 0:
            if _zeros_from(buf, offset):
                return  # torn: an appended tail left as zeros
            raise CorruptLogError(path, offset, "an empty frame, and more after it")
        stop = offset + FRAME_HEAD.size + n
        if stop + FRAME_TAIL.size > end:
            refuse_a_damaged_length(buf, offset, path)
            return  # torn: the frame claims more bytes than the file holds
        payload = bytes(buf[offset + FRAME_HEAD.size : stop])
        crc, n2 = FRAME_TAIL.unpack_from(buf, stop)
        if n2 != n or crc != crc32(payload):
            if _zeros_from(buf, stop + FRAME_TAIL.size):
                return  # torn: the last frame was half-written (zeros may follow it)
            raise CorruptLogError(path, offset)
        yield offset, payload
        offset = stop + FRAME_TAIL.size


def refuse_a_damaged_length(buf: bytes | memoryview, offset: int, path: str, file_at: int = 0) -> None:
    """The frame at ``offset`` claims more bytes than ``buf`` holds: a torn tail when
    nothing whole follows it; with a whole frame after it, :class:`CorruptLogError` (a lost
    write reads as zeros, never as such a length). ``file_at``: where ``buf`` starts in
    the file."""
    if frames_past(buf, offset + 1):
        raise CorruptLogError(
            path, file_at + offset, "a length past the end, and whole frames after it: not a torn tail"
        )


def lost_write(buf: bytes | memoryview, offset: int, file_at: int = 0) -> bool:
    """Whether the bad frame at ``offset`` is what a write lost at a power cut leaves: a
    disk writes a sector whole or not at all, and one it did not write reads as it was
    before, which past an append-only file's synced end is zeros. So the frame's length
    is zero, or its two lengths disagree (the tail lies in such a sector), or a whole
    sector within it is empty. A frame whose lengths agree, none of whose sectors is
    empty, yet which fails its checksum (or is too short for what it frames), is damage
    of another kind. ``file_at``: where ``buf`` starts in the file (sectors are the
    file's)."""
    (n,) = FRAME_HEAD.unpack_from(buf, offset)
    stop = offset + FRAME_HEAD.size + n
    if n == 0 or stop + FRAME_TAIL.size > len(buf) or FRAME_TAIL.unpack_from(buf, stop)[1] != n:
        return True
    first = -(-(file_at + offset) // SECTOR) * SECTOR - file_at
    sectors = range(first, stop + FRAME_TAIL.size - SECTOR + 1, SECTOR)
    return any(not bytes(buf[k : k + SECTOR]).strip(b"\0") for k in sectors)


def frames_past(buf: bytes, start: int) -> list[tuple[int, bytes]]:
    """``(offset, payload)`` of every frame that checks out in ``buf`` from ``start`` on,
    wherever it begins: what is whole past damage, which a scan cannot step over (a bad
    frame's length is not to be trusted). A candidate is any offset whose length field
    agrees with the one after the payload it claims; its checksum decides, and frames
    found do not overlap. O(bytes) in numpy, and the bytes of the candidates."""
    end = len(buf)
    m = end - start - 3  # offsets with a whole u32 at them
    if m < FRAME_OVERHEAD:
        return []
    heads = np.empty(m, dtype=np.uint32)
    for a in range(4):  # the u32 at every offset, from four aligned views
        heads[a::4] = np.frombuffer(buf, dtype="<u4", count=(m - a + 3) // 4, offset=start + a)
    n = heads.astype(np.int64)
    at = np.flatnonzero((n > 0) & (np.arange(m) + FRAME_OVERHEAD + n <= end - start))
    at = at[heads[at + 8 + n[at]] == heads[at]]
    found: list[tuple[int, bytes]] = []
    free = start  # the first offset past the frames found
    for offset in (at + start).tolist():
        if offset < free:
            continue
        (length,) = FRAME_HEAD.unpack_from(buf, offset)
        stop = offset + FRAME_HEAD.size + length
        payload = bytes(buf[offset + FRAME_HEAD.size : stop])
        if FRAME_TAIL.unpack_from(buf, stop)[0] == crc32(payload):
            found.append((offset, payload))
            free = stop + FRAME_TAIL.size
    return found


def _zeros_from(buf: bytes | memoryview, offset: int) -> bool:
    """Whether ``buf`` holds nothing but zero bytes from ``offset`` to its end."""
    return not bytes(buf[offset:]).strip(b"\0")


def committed_frames(buf: bytes | memoryview, start: int, path: str) -> Iterator[tuple[int, bytes]]:
    """Like :func:`scan_frames` over bytes that were all committed: no torn tail allowed."""
    end = start
    for offset, payload in scan_frames(buf, start, path):
        end = offset + FRAME_OVERHEAD + len(payload)
        yield offset, payload
    if end != len(buf):
        raise CorruptLogError(path, end, "committed bytes do not end on a whole frame")
