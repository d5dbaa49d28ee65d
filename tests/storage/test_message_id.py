"""Message ids: what parses, and the ids no store can hold."""

from __future__ import annotations

import pytest

from horologe.storage import MessageId, UnknownMessageError
from horologe.storage.hour_names import MAX_HOUR, hour_name, parse_hour_name


def test_an_id_round_trips():
    assert MessageId.parse("000734a90000002a") == MessageId(472233, 42)
    assert str(MessageId(472233, 42)) == "000734a90000002a"


@pytest.mark.parametrize("text", ["000734A90000002A", "000734a9", "000734a90000002g", "0x0734a90000002a"])
def test_a_malformed_id_is_unknown(text):
    with pytest.raises(UnknownMessageError):
        MessageId.parse(text)


def test_an_hour_past_year_9999_is_unknown_before_it_reaches_a_store():
    """Found by the fuzz test: DELETE /v1/messages/2000000000000000 was proposed, and naming
    its hour's files raised OverflowError in the apply, which halted every replica."""
    assert parse_hour_name(hour_name(MAX_HOUR)) == MAX_HOUR == parse_hour_name("9999123123")
    assert MessageId.parse(f"{MAX_HOUR:08x}00000000").hour == MAX_HOUR
    for text in (f"{MAX_HOUR + 1:08x}00000000", "2000000000000000", "ffffffffffffffff"):
        with pytest.raises(UnknownMessageError, match="past year 9999"):
            MessageId.parse(text)
