"""ReceivedMessage.from_record (a pull's msgpack answer, by messages or by columns) makes
the same frozen message its constructor does, headers that rename it included."""

from __future__ import annotations

import gc
import pickle
import struct

import msgpack
import msgspec
import pytest

from horologe.client import models, pull_columns
from horologe.client.calls import MSGPACK
from horologe.client.core import pull_answer, to_pulled
from horologe.client.models import ID_HEADER, ORIGIN_HEADER, ReceivedMessage
from horologe.storage import Message, MessageId
from horologe.storage.message import FLAT_RECORD_HEAD, RECORD_MAP_HEAD, RECORD_ORDER, encode_record


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


def _columns(records, receipts, deliver_at, delivered_at, batch_receipts) -> bytes:
    """A pull's answer by columns, as node/consumers/wire.as_columns writes it, holding
    ``records`` (each as it goes on the wire)."""
    pack = msgpack.Packer(use_bin_type=True).pack
    n = len(records)
    return b"".join(
        [b"\x86", pack("records"), msgpack.Packer().pack_array_header(n), *records]
        + [pack("receipts"), pack(receipts)]
        + [pack("deliver_at"), pack(struct.pack(f"<{n}q", *deliver_at))]
        + [pack("delivered_at"), pack(struct.pack(f"<{n}q", *delivered_at))]
        + [pack("batch_receipts"), pack(batch_receipts), pack("clock_ms"), pack(10)]
    )


def _from_wire(rec: dict, layout: str) -> ReceivedMessage:
    """Through the wire, as a pull answer's one message in ``layout``, decoded as the SDK
    decodes it."""
    if layout == "messages":
        answer = msgpack.packb({"messages": [[rec, "r1", 7, 9]], "batch_receipts": [], "clock_ms": 10})
    else:  # the stored map, sent flat
        stored = msgpack.packb(rec, use_bin_type=True)
        assert stored[:1] == RECORD_MAP_HEAD
        answer = _columns([FLAT_RECORD_HEAD + stored[1:]], ["r1"], [7], [9], [])
    (message,) = to_pulled(pull_answer(answer, MSGPACK), None)[0]
    return message


@pytest.fixture(params=["messages", "columns"])
def layout(request) -> str:
    return request.param


def test_plain_record(layout):
    m = _from_wire(_record(), layout)
    want = ReceivedMessage("00000000000000010000", "r1", "orders", b"hello", ("a", "b"), 7, 9, 0, {}, None)
    assert m == want
    assert m.text == "hello"


def test_headers_name_the_original_id_and_topic(layout):
    headers = {ID_HEADER: "00000000000000020000", ORIGIN_HEADER: "payments", "x-user": "1"}
    m = _from_wire(_record(headers=headers, key="k", attempt=3, topic="%RETRY%g"), layout)
    tags = ("a", "b")
    want = ReceivedMessage("00000000000000020000", "r1", "payments", b"hello", tags, 7, 9, 3, headers, "k")
    assert m == want


def test_it_stays_frozen(layout):
    m = _from_wire(_record(), layout)
    with pytest.raises(AttributeError):
        m.body = b"other"  # type: ignore[misc]
    assert msgspec.structs.replace(m, attempt=1).attempt == 1
    assert msgspec.structs.asdict(m)["body"] == b"hello"


def test_it_is_no_object_for_the_collector_and_still_pickles(layout):
    """Untracked: a message a consumer holds adds nothing to what a collection walks."""
    m = _from_wire(_record(headers={"x-user": "1"}, key="k"), layout)
    assert not hasattr(m, "__dict__") and not gc.is_tracked(m)
    assert pickle.loads(pickle.dumps(m)) == m


def test_the_sdk_reads_flat_records_in_the_order_the_node_writes_them():
    """Else every flat record would take the slow way, by key, and all else still pass."""
    stored = encode_record(MessageId(1, 2), Message("t", b"x", 5, 1, ("a",), "k", {"h": "v"}, 2))
    flat = msgpack.unpackb(FLAT_RECORD_HEAD + stored[1:], use_list=False)
    assert flat[::2] == RECORD_ORDER == models._FLAT_KEYS


def test_an_answer_by_columns_as_the_node_writes_it_is_read_by_msgspec():
    """Else every pull would take the general way, msgpack then by key, and all else still pass."""
    stored = [
        encode_record(MessageId(1, k), Message("t", b"x", 5, 1, ("a",), None, headers, 0))
        for k, headers in enumerate([{}, {ID_HEADER: "00000000000000090000", "h": "v"}])
    ]
    flat = [FLAT_RECORD_HEAD + s[1:] for s in stored]
    answer = pull_columns.decode(_columns(flat, ["r0", "r1"], [0, 1], [0, 1], ["b"]))
    assert answer is not None and answer.batch_receipts == ["b"] and answer.clock_ms == 10
    assert [m.id for m in answer.messages] == [str(MessageId(1, 0)), "00000000000000090000"]
    assert answer.messages[1].headers == {ID_HEADER: "00000000000000090000", "h": "v"}


def test_a_record_whose_keys_come_in_another_order_is_read_by_key():
    rec = _record(key="k")
    reordered = {"topic": rec.pop("topic"), **rec}
    flat = msgpack.packb([x for kv in reordered.items() for x in kv], use_bin_type=True)
    as_map = msgpack.packb(_record(), use_bin_type=True)
    answer = _columns([flat, as_map], ["r0", "r1"], [0, 1], [0, 1], ["b"])
    assert pull_columns.decode(answer) is None
    first, second = pull_answer(answer, MSGPACK).messages
    assert (first.id, first.topic, first.key) == ("00000000000000010000", "orders", "k")
    assert second.topic == "orders"
