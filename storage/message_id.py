"""Message ids encode where a message lives, so look-ups need no global map.

An id is 16 lowercase hex digits: the delivery-bucket hour (u32, hours since the
Unix epoch) then the message's globalIndex in that hour's index (u32)::

    000734a9 0000002a   ->  hour 472233, globalIndex 42
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .errors import UnknownMessageError
from .hour_names import MAX_HOUR

ID_LENGTH = 16
ID_PATTERN = f"[0-9a-f]{{{ID_LENGTH}}}"  # what parse() takes, as a regular expression
_HEX = frozenset("0123456789abcdef")


class MessageId(NamedTuple):
    hour: int
    global_index: int

    def __str__(self) -> str:
        return f"{self.hour:08x}{self.global_index:08x}"

    @classmethod
    def parse(cls, text: str) -> MessageId:
        if len(text) != ID_LENGTH or not _HEX.issuperset(text):
            raise UnknownMessageError(f"malformed message id {text!r}: want {ID_LENGTH} hex digits")
        hour = int(text[:8], 16)
        if hour > MAX_HOUR:  # no store holds it; an apply would fail naming its files
            raise UnknownMessageError(f"no message {text}: its hour is past year 9999")
        return cls(hour, int(text[8:], 16))


def by_hour(mids: list[MessageId | None]) -> dict[int, list[int]]:
    """The positions in ``mids`` of each hour's messages (None names none), hours in the
    order they first appear: for reading or writing each hour's files once."""
    out: dict[int, list[int]] = {}
    for k, mid in enumerate(mids):
        if mid is not None:
            out.setdefault(mid.hour, []).append(k)
    return out


_FORMAT_MAX = 16  # as many ids as are formatted one by one: below that numpy's set-up costs more
_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_NIBBLE_SHIFTS = np.arange(60, -4, -4, dtype=np.uint64)  # a u64's 16 hex digits, first to last


def id_digits(hours, global_indexes) -> np.ndarray:
    """The ASCII digits of each pair's id, one row of ``ID_LENGTH`` bytes per pair (arrays,
    or a scalar hour shared by all)."""
    ids = np.asarray(hours, dtype=np.uint64) << np.uint64(32) | np.asarray(global_indexes, dtype=np.uint64)
    return _HEX_DIGITS[(ids.reshape(-1, 1) >> _NIBBLE_SHIFTS) & np.uint64(15)]


def id_strings(hours, global_indexes) -> list[str]:
    """``str(MessageId(h, g))`` of each pair, for many at once (a few, one by one)."""
    if np.size(global_indexes) <= _FORMAT_MAX:
        gis = np.atleast_1d(global_indexes).tolist()
        hs = np.atleast_1d(hours).tolist()
        if len(hs) == 1:
            hs *= len(gis)
        return [str(MessageId(h, g)) for h, g in zip(hs, gis, strict=True)]
    codes = id_digits(hours, global_indexes).astype(np.uint32)
    return codes.view(f"<U{ID_LENGTH}").ravel().tolist()
