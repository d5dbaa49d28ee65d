"""ReceivedMessage.from_record (a pull's msgpack answer) makes the same frozen message its
constructor does, headers that rename it included."""

from __future__ import annotations

import dataclasses

import msgpack
import pytest

from horologe.client.calls import MSGPACK, parse_body
from horologe.client.models import ID_HEADER, ORIGIN_HEADER, ReceivedMessage


def _record(**over) -> dict:
    rec = {
        "id": "00000000000000010000",
        "topic": "orders",
        "tags": ["a", "b"],
        "body": b"hello",
        "deliver_at_ms": 5,
        "key": None,
        "headers": {},
        "attempt": 0,
        "produced_at_ms": 1,
    }
    return {**rec, **over}


def _from_wire(rec: dict) -> ReceivedMessage:
    """Through the wire, as a pull answer's one message, decoded as the SDK decodes it."""
    answer = {"messages": [[rec, "r1", 7, 9]], "batch_receipts": [], "clock_ms": 10}
    raw = msgpack.packb(answer, use_bin_type=True)
    (message,) = parse_body(raw, MSGPACK)["messages"]
    return ReceivedMessage.from_record(*message)


def test_plain_record():
    m = _from_wire(_record())
    want = ReceivedMessage("00000000000000010000", "r1", "orders", b"hello", ("a", "b"), 7, 9, 0, {}, None)
    assert m == want
    assert m.text == "hello"


def test_headers_name_the_original_id_and_topic():
    headers = {ID_HEADER: "00000000000000020000", ORIGIN_HEADER: "payments", "x-user": "1"}
    m = _from_wire(_record(headers=headers, key="k", attempt=3, topic="%RETRY%g"))
    tags = ("a", "b")
    want = ReceivedMessage("00000000000000020000", "r1", "payments", b"hello", tags, 7, 9, 3, headers, "k")
    assert m == want


def test_it_stays_frozen():
    m = _from_wire(_record())
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.body = b"other"  # type: ignore[misc]
    assert dataclasses.replace(m, attempt=1).attempt == 1
