"""Message ids encode where a message lives, so look-ups need no global map.

An id is 16 lowercase hex digits: the delivery-bucket hour (u32, hours since the
Unix epoch) then the message's globalIndex in that hour's index (u32)::

    000734a9 0000002a   ->  hour 472233, globalIndex 42
"""

from __future__ import annotations

from typing import NamedTuple

from .errors import UnknownMessageError

ID_LENGTH = 16
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
        return cls(int(text[:8], 16), int(text[8:], 16))
