"""Row mapping and validation without Spark."""

from __future__ import annotations

import pytest

from horologe.pipeline.column_mapping import ColumnMapping
from horologe.pipeline.errors import ColumnMappingError

NOW = 1_767_225_600_000
M = ColumnMapping(body_col="body", topic="orders", tags_col="tags", deliver_after_col="after")


def test_a_good_row_becomes_a_keyed_message():
    msg = M.to_message({"body": "hi", "tags": "a,b", "after": "90s"}, NOW)
    assert msg["topic"] == "orders" and msg["tags"] == ["a", "b"] and msg["deliver_after"] == "90s"
    assert msg["key"].startswith("row-")
    assert M.to_message({"body": "hi", "tags": "a,b", "after": "90s"}, NOW + 5)["key"] == msg["key"]
    assert M.to_message({"body": "hi!", "tags": "a,b", "after": "90s"}, NOW)["key"] != msg["key"]
    assert M.to_message({"body": "1", "tags": None, "after": "5000"}, NOW)["deliver_after"] == 5000


@pytest.mark.parametrize(
    "row, reason",
    [
        ({"body": None, "tags": "", "after": "1s"}, "body: empty"),
        ({"body": "x", "tags": "", "after": None}, "after: empty"),
        ({"body": "x", "tags": "", "after": "soon"}, "deliver_after:"),
        ({"body": "x", "tags": "bad tag", "after": "1s"}, "tags:"),
        ({"body": "x", "tags": "", "after": "999d"}, "deliver_after: deliver time is beyond"),
    ],
)
def test_bad_rows_are_refused_with_a_reason(row, reason):
    with pytest.raises(ValueError) as e:
        M.to_message(row, NOW)
    assert str(e.value).startswith(reason)


def test_key_column_and_topic_column():
    m = ColumnMapping(body_col="b", topic_col="t", deliver_at_col="at", key_col="k")
    msg = m.to_message({"b": "x", "t": "pay", "at": "2026-01-01T00:00:05Z", "k": "order-1"}, NOW)
    assert msg["topic"] == "pay" and msg["key"] == "order-1" and msg["deliver_at"] == "2026-01-01T00:00:05Z"
    with pytest.raises(ValueError, match="topic"):
        m.to_message({"b": "x", "t": "bad topic", "at": 5, "k": "1"}, NOW)


def test_mapping_options_are_checked():
    with pytest.raises(ColumnMappingError):
        ColumnMapping(body_col="b", deliver_at_col="a")  # no topic
    with pytest.raises(ColumnMappingError):
        ColumnMapping(body_col="b", topic="t", deliver_at_col="a", delay_level_col="l")
    with pytest.raises(ColumnMappingError, match="no column nope"):
        ColumnMapping(body_col="nope", topic="t", deliver_at_col="a").check_columns(["a", "b"])


AT = ColumnMapping(body_col="b", topic="t", deliver_at_col="at", tags_col="tags")


def test_a_body_that_is_not_text_is_sent_as_it_is_not_as_a_python_repr():
    """A Parquet binary column became the body ``"b'hi'"``, a JSON object ``"{'id': 1}"``:
    valid, scheduled, and wrong."""
    assert AT.to_message({"b": b"\x00hi", "at": NOW}, NOW)["body"] == b"\x00hi"
    assert AT.to_message({"b": bytearray(b"hi"), "at": NOW}, NOW)["body"] == b"hi"
    assert AT.to_message({"b": {"id": 1, "to": ["a"]}, "at": NOW}, NOW)["body"] == '{"id":1,"to":["a"]}'
    assert AT.to_message({"b": [1, 2], "at": NOW}, NOW)["body"] == "[1,2]"
    assert AT.to_message({"b": True, "at": NOW}, NOW)["body"] == "true"
    assert AT.to_message({"b": 12, "at": NOW}, NOW)["body"] == "12"


def test_a_key_over_the_limit_is_refused_here_not_by_the_server():
    """The key was set after the row was checked: the server refused it inside its batch,
    and the row went to no rejects file."""
    m = ColumnMapping(body_col="b", topic="t", deliver_at_col="at", key_col="k")
    with pytest.raises(ValueError, match="^key:"):
        m.to_message({"b": "x", "at": NOW, "k": "k" * 257}, NOW)
    assert m.to_message({"b": "x", "at": NOW, "k": 7}, NOW)["key"] == "7"


def test_tags_that_are_neither_text_nor_a_list_are_a_rejected_row():
    """``list(5)`` raised TypeError, which no rejects file caught: the task, then the job, failed."""
    with pytest.raises(ValueError, match="^tags:"):
        AT.to_message({"b": "x", "at": NOW, "tags": 5}, NOW)


def test_a_timestamp_column_is_the_same_instant_and_key_in_any_time_zone():
    """A timestamp reached the row as a datetime in the session's zone, sent as its ISO
    text: a rerun in another zone made every row a new key, and scheduled it again."""
    import datetime as dt

    utc = dt.datetime(2026, 1, 1, 0, 0, 5, tzinfo=dt.UTC)
    paris = utc.astimezone(dt.timezone(dt.timedelta(hours=1)))
    one, two = (AT.to_message({"b": "x", "at": at}, NOW) for at in (utc, paris))
    assert one["deliver_at"] == two["deliver_at"] == NOW + 5_000
    assert one["key"] == two["key"]
    with pytest.raises(ValueError, match="^at: .*time zone"):
        AT.to_message({"b": "x", "at": dt.datetime(2026, 1, 1)}, NOW)


def test_deliver_times_in_epoch_seconds_are_refused_not_delivered_at_once():
    """1767225600 (seconds) read as milliseconds is 1970-01-21: due, so delivered at once."""
    with pytest.raises(ValueError, match="^at: .*seconds"):
        AT.to_message({"b": "x", "at": NOW // 1000}, NOW)
    with pytest.raises(ValueError, match="^at: .*seconds"):
        AT.to_message({"b": "x", "at": str(NOW // 1000)}, NOW)
    assert AT.to_message({"b": "x", "at": 0}, NOW)["deliver_at"] == 0  # the epoch itself: now


def test_a_reject_shows_a_binary_value_as_its_text_not_a_python_repr():
    """A message the server refused went to the rejects as json.dumps(default=str): its
    binary body as "b'...'" (the form the posting no longer sends)."""
    from horologe.pipeline.schedule import _as_json

    assert _as_json({"body": b"caf\xc3\xa9", "n": 1}) == '{"body": "caf\\u00e9", "n": 1}'
