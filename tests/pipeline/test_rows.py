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
