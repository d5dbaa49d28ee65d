"""The plain path (node/http/rules/plain_batch.py), of a batch and of a single produce,
takes exactly what the general rules take, as the same messages, from the request's bytes
(JSON, or msgpack as the SDK sends it), and leaves everything else to them."""

from __future__ import annotations

import msgpack
import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from horologe.node.http.rules.plain_batch import plain_batch, plain_message
from horologe.storage.message_json import _plain

from ..storage.test_plain_messages import LIMITS, MAX_AT, NOW, _general, items, keys, times

# Items plain but for at most a field or two, so that most reach the plain path and each
# of its rules decides (``items`` alone seldom gives a topic and a body together).
near_plain = st.fixed_dictionaries(
    {
        "topic": st.sampled_from(["orders", "x.y_z-1", "a" * 128, "", "-bad", "a b", "é", "a" * 129]),
        "body": st.one_of(st.text(max_size=66), st.binary(max_size=66)),
    },
    optional={"key": keys, "deliver_at": times, "tags": st.sampled_from([[], ["t"], ["a b"], ["t"] * 17])},
)

FORMATS = {
    "json": (orjson.dumps, orjson.loads, str),
    "msgpack": (
        lambda b: msgpack.packb(b, use_bin_type=True),
        lambda r: msgpack.unpackb(r, raw=False),
        bytes,
    ),
}


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(sorted(FORMATS)), st.lists(st.one_of(items, near_plain), max_size=3))
@example("json", [{"topic": "orders", "body": "x", "deliver_at": 2**64}])
@example("msgpack", [{"topic": "orders", "body": b"x", "deliver_at": 2**64 - 1}])
@example("msgpack", [{"topic": "orders", "body": b"x", "key": None}])
# one topic of the batch not a name:
@example("msgpack", [{"topic": "orders", "body": b"x"}, {"topic": "-bad", "body": b"y"}])
@example("json", [{"topic": "a b", "body": "x"}, {"topic": "a b", "body": "y"}])
def test_the_plain_batch_agrees_with_the_general_rules(fmt, batch):
    encode, decode, body_type = FORMATS[fmt]
    try:
        raw = encode({"messages": batch})
    except (TypeError, OverflowError, orjson.JSONEncodeError):
        return  # not something a client can send in this format
    sent = decode(raw)["messages"]  # what the general path parses
    cols = plain_batch(raw, fmt == "msgpack", NOW, LIMITS, 1000)
    if cols is not None:
        assert [cols.message(i) for i in range(len(cols))] == [_general(obj) for obj in sent]
    elif all(_plain(obj, NOW, LIMITS) is not None and type(obj["body"]) is body_type for obj in sent):
        pytest.fail(f"a plain batch left to the general path: {sent!r}")


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(sorted(FORMATS)), st.one_of(items, near_plain))
@example("json", {"topic": "orders", "body": "x", "deliver_at": 2**64})
@example("json", {"topic": "orders", "body": "x", "deliver_at": 5.0})
@example("msgpack", {"topic": "orders", "body": b"x", "key": None})
@example("json", {"topic": "orders", "body": "x" * 65})  # over the body limit
@example("msgpack", {"topic": "orders", "body": b"x", "deliver_at": MAX_AT + 1})  # past the maximum delay
@example("json", {"topic": "orders", "body": "x", "deliver_at": -1})
@example("msgpack", {"topic": "é", "body": b"x"})  # not a name
def test_a_plain_message_agrees_with_the_general_rules(fmt, obj):
    encode, decode, body_type = FORMATS[fmt]
    try:
        raw = encode(obj)
    except (TypeError, OverflowError, orjson.JSONEncodeError):
        return  # not something a client can send in this format
    sent = decode(raw)
    msg = plain_message(raw, fmt == "msgpack", NOW, LIMITS)
    if msg is not None:
        assert msg == _general(sent)
    elif _plain(sent, NOW, LIMITS) is not None and type(sent["body"]) is body_type:
        pytest.fail(f"a plain message left to the general path: {sent!r}")


def test_what_the_sdk_sends_is_columns_with_tags_by_position():
    sent = [
        {"topic": "orders", "body": b"a", "key": "k0", "deliver_at": NOW + 5},
        {"topic": "orders", "body": b"b", "key": "k1", "tags": ["vip", "eu"]},
        {"topic": "audit", "body": b"c", "key": "k2", "tags": []},
    ]
    cols = plain_batch(msgpack.packb({"messages": sent}), True, NOW, LIMITS, 1000)
    assert cols.topics == ["orders", "orders", "audit"] and cols.bodies == [b"a", b"b", b"c"]
    assert cols.deliver_at_ms.tolist() == [NOW + 5, NOW, NOW]
    assert cols.keys == ["k0", "k1", "k2"] and cols.tags == {1: ("vip", "eu")}
    assert len(plain_batch(b'{"messages": []}', False, NOW, LIMITS, 1000)) == 0


@pytest.mark.parametrize(
    "raw",
    [
        b'{"messages": [{"topic": "orders", "body": "x"}], "extra": 1}',  # the shape the general path refuses
        b'{"messages": [{"topic": "orders", "body": "x"}, {"topic": "orders", "body": "y"}]}',  # > max_items
        b'{"messages": [{"topic": "orders", "body": "' + b"x" * 65 + b'"}]}',  # body over the limit
        b'{"messages": [{"topic": "orders", "body": "\\ud800"}]}',  # a lone surrogate
        b'{"messages": [{"topic": "orders", "body": "x"}]} trailing',
        b"\xff",
    ],
)
def test_what_the_general_path_must_judge_is_left_to_it(raw):
    assert plain_batch(raw, False, NOW, LIMITS, 1) is None
