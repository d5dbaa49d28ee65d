"""Produce entries carry their messages as columns; entries written before still decode."""

from __future__ import annotations

import msgpack
import pytest

from horologe.cluster import PRODUCE, Entry
from horologe.cluster.entries import decode
from horologe.cluster.errors import BadEntryError
from horologe.storage import Message
from horologe.wheel import Watermark

T = 1_767_225_600_000
MESSAGES = [
    Message("a", b"one", T + 5, T),
    Message("b", b"\x00\xff", T + 9, T + 1, ("red", "blue"), "k", {"h": "v"}, 2),
    Message("a", b"", T, T, (), None, {}, 0),
]


def _messages(entry: Entry) -> list[Message]:
    return [entry.messages.message(i) for i in range(len(entry.messages))]


def test_a_produce_entry_round_trips_its_messages():
    blob = Entry(PRODUCE, Watermark(T), T, MESSAGES).encode()
    assert "cols" in msgpack.unpackb(blob)
    assert _messages(decode(blob)) == MESSAGES


def test_a_produce_entry_written_before_columns_still_decodes():
    old = {
        "t": "P",
        "ws": Watermark(T).to_wire(),
        "clock_ms": T,
        "msgs": [
            [m.topic, m.body, m.deliver_at_ms, m.produced_at_ms, list(m.tags), m.key, m.headers, m.attempt]
            for m in MESSAGES
        ],
    }
    assert _messages(decode(msgpack.packb(old, use_bin_type=True))) == MESSAGES


@pytest.mark.parametrize(
    "cols",
    [
        [["a"], [b"x"], b"\x00" * 7, b"\x00" * 8, [None], [], [], []],  # a time cut short
        [["a", "b"], [b"x"], b"\x00" * 16, b"\x00" * 16, [None, None], [], [], []],  # a body missing
        [["a"], [b"x"], b"\x00" * 8, b"\x00" * 8, [None], [[3, ["t"]]], [], []],  # tags of no message
    ],
)
def test_malformed_columns_are_a_bad_entry(cols):
    entry = {"t": "P", "ws": Watermark(T).to_wire(), "clock_ms": T, "cols": cols}
    blob = msgpack.packb(entry, use_bin_type=True)
    with pytest.raises(BadEntryError):
        decode(blob)
