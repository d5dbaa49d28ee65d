"""A batch as columns: the same checks, records and chains as one message at a time."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horologe.storage import (
    DeliverTimeOutOfRangeError,
    InvalidMessageError,
    Message,
    MessageColumns,
    MessageId,
    MessageLimits,
    Storage,
    StorageConfig,
    check_store,
    id_strings,
)
from horologe.storage.message import RECORD_KEYS, RECORD_ORDER, encode_record, encode_records

from .helpers import H0, HOUR, msg

MIXED = [
    Message("a", b"one", H0 + 5, H0),
    Message("b", b"two", H0 + 5, H0, ("red", "blue"), "k2", {"h": "v"}, 3),
    Message("a", bytearray(b"three"), H0 + 1_000, H0 - 7, (), "k3"),
]


def test_columns_give_back_the_messages_they_were_made_of():
    cols = MessageColumns.from_messages(MIXED)
    assert [cols.message(i) for i in range(len(cols))] == MIXED
    assert (cols.tags, cols.headers, cols.attempts) == ({1: ("red", "blue")}, {1: {"h": "v"}}, {1: 3})


@pytest.mark.parametrize(
    ("bad", "error", "field"),
    [
        (Message("a", b"x" * 11, H0, H0), InvalidMessageError, "body"),
        (Message("", b"x", H0, H0), InvalidMessageError, "topic"),
        (Message("a", b"x", -1, H0), DeliverTimeOutOfRangeError, "deliver_at"),
        (Message("a", b"x", H0 + 1_001, H0), DeliverTimeOutOfRangeError, "deliver_at"),
        (Message("a", "text", H0, H0), InvalidMessageError, "body"),  # type: ignore[arg-type]
        (Message("a", b"x", H0, H0, attempt=-1), InvalidMessageError, "attempt"),
    ],
)
def test_the_first_bad_message_is_refused_as_alone(bad, error, field):
    limits = MessageLimits(max_body_bytes=10, max_delay_ms=1_000)
    good = Message("a", b"fine", H0, H0)
    with pytest.raises(error) as alone:
        limits.validate(bad)
    with pytest.raises(error) as in_batch:
        MessageColumns.from_messages([good, bad, Message("", b"", -5, H0)]).validate(limits)
    assert (str(in_batch.value), in_batch.value.field) == (str(alone.value), field)
    MessageColumns.from_messages([good, good]).validate(limits)


def test_unequal_columns_are_refused():
    with pytest.raises(ValueError, match="unequal"):
        MessageColumns(["a"], [], np.zeros(1, np.int64), np.zeros(1, np.int64), [None])
    with pytest.raises(ValueError, match="outside"):
        MessageColumns(["a"], [b""], np.zeros(1, np.int64), np.zeros(1, np.int64), [None], tags={1: ("x",)})


def _messages(cols: MessageColumns) -> list[Message]:
    return [cols.message(i) for i in range(len(cols))]


def test_columns_join_and_part_as_their_messages_do():
    many = MIXED * 3
    joined = MessageColumns.concat([MessageColumns.from_messages(MIXED) for _ in range(3)])
    assert _messages(joined) == many
    assert sorted(joined.tags) == [1, 4, 7] and sorted(joined.attempts) == [1, 4, 7]
    for lo, hi in ((0, 9), (1, 5), (4, 5), (3, 3)):
        assert _messages(joined.part(lo, hi)) == many[lo:hi]


def test_a_message_s_wire_size_counts_each_field():
    """Each field's UTF-8 bytes, plus framing: 64 a message, 16 for its tag set and 5 a
    tag, 16 for its headers and 10 a header (msgpack's string heads take 5 bytes at most)."""
    sizes = MessageColumns.from_messages(MIXED).wire_sizes().tolist()
    assert sizes == [
        3 + 1 + 64,
        3 + 1 + 2 + 64 + (16 + len("red") + 5 + len("blue") + 5) + (16 + len("h") + len("v") + 10),
        5 + 1 + 2 + 64,
    ]
    wide = MessageColumns.from_messages([Message("t\u00e9", b"", 0, 0, key="\u9577")])
    assert wide.wire_sizes().tolist() == [3 + 3 + 64]


@pytest.mark.parametrize("n", [1, 3, 16, 17, 200])  # formatted one by one up to 16, by numpy above
def test_ids_for_many_read_as_one_at_a_time(n):
    gis = np.array([0, 1, 0xFFFF_FFFF] * n, dtype=np.int64)[:n]
    assert id_strings(HOUR, gis) == [str(MessageId(HOUR, g)) for g in gis.tolist()]
    hours = np.arange(n) + 1
    assert id_strings(hours, gis) == [
        str(MessageId(h, g)) for h, g in zip(hours.tolist(), gis.tolist(), strict=True)
    ]
    assert id_strings(np.array([1, 2]), np.array([3, 4])) == ["0000000100000003", "0000000200000004"]


def test_a_record_is_the_map_of_its_fields_id_first():
    m = MIXED[1]
    rec = encode_record(MessageId(HOUR, 7), m)
    as_map = {
        "id": str(MessageId(HOUR, 7)),
        "topic": m.topic,
        "tags": list(m.tags),
        "body": m.body,
        "deliver_at_ms": m.deliver_at_ms,
        "key": m.key,
        "headers": m.headers,
        "attempt": m.attempt,
        "produced_at_ms": m.produced_at_ms,
    }
    assert rec == msgpack.packb(as_map, use_bin_type=True)
    assert msgpack.unpackb(rec).keys() == RECORD_KEYS


_text = st.text(max_size=300)
_int = st.integers(min_value=-(2**63), max_value=2**64 - 1)
_record_fields = st.tuples(
    st.text(min_size=16, max_size=16),
    _text,
    st.lists(_text, max_size=3),
    st.binary(max_size=70_000) | st.binary(max_size=300).map(bytearray),
    _int,
    st.none() | _text,
    st.dictionaries(_text, _text, max_size=3),
    _int,
    _int,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_record_fields, max_size=4))
def test_records_are_packed_as_msgpack_packs_the_map_of_their_fields(rows):
    """Byte for byte what msgpack-python packs for the map in RECORD_ORDER (the format
    the delay log documents), over every width of string, bin and integer."""
    columns = [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in RECORD_ORDER]
    want = [msgpack.packb(dict(zip(RECORD_ORDER, row, strict=True)), use_bin_type=True) for row in rows]
    assert encode_records(*columns) == want


def test_records_of_columns_of_unequal_lengths_are_refused():
    with pytest.raises(ValueError, match="unequal lengths"):
        encode_records(["0" * 16], ["t"], [()], [b""], [1], [None], [{}], [0], [])


def test_a_batch_chains_each_second_in_arrival_order(tmp_path):
    """Seconds repeated within a batch and across batches link as one message at a time would."""
    rng = np.random.default_rng(3)
    with Storage(str(tmp_path), StorageConfig(fsync=False)) as s:
        arrivals: dict[int, list[int]] = {}
        for ri in range(1, 6):
            secs, ms = rng.integers(0, 4, size=40), rng.integers(0, 1000, size=40)
            batch = [msg(H0 + int(sec) * 1_000 + int(m)) for sec, m in zip(secs, ms, strict=True)]
            ids = s.apply(ri, lambda tx, b=batch: tx.append(b))
            for sec, mid in zip(secs.tolist(), ids, strict=True):
                arrivals.setdefault(sec, []).append(mid.global_index)
        bucket = s.bucket(HOUR)
        entries = bucket.index_view()
        for sec, gis in arrivals.items():
            assert bucket.chain(sec).tolist() == gis
            assert entries["local_index"][gis].tolist() == list(range(len(gis)))
        assert check_store(s).messages == 200
