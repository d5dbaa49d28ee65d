"""The request rules where the fuzz test found them to differ from /openapi.json, which
says exactly what they accept (node/http/openapi/schemas.py)."""

from __future__ import annotations

import pytest

from horologe.node.http.errors import ApiError
from horologe.node.http.rules.cluster import parse_new_member
from horologe.node.http.rules.messages import parse_consumer_request, parse_message
from horologe.storage.message import MessageLimits

NOW = 1_767_225_600_000


def refusal(fn, *args) -> tuple[int, str, str | None]:
    with pytest.raises(ApiError) as e:
        fn(*args)
    return e.value.status, e.value.code, e.value.field


def test_a_number_with_a_zero_fraction_is_an_integer():
    """JSON Schema reads 5.0 and 1e3 as integers, and so does the API now (was 400)."""
    msg = parse_message({"topic": "t", "body": "x", "deliver_at": 1.7e12}, NOW, MessageLimits())
    assert msg.deliver_at_ms == 1_700_000_000_000
    msg = parse_message({"topic": "t", "body": "x", "delay_level": 2.0}, NOW, MessageLimits())
    assert msg.deliver_at_ms == NOW + 5_000
    assert refusal(parse_message, {"topic": "t", "body": "x", "delay_level": 2.5}, NOW, MessageLimits()) == (
        400,
        "invalid_field",
        "delay_level",
    )
    # an integer past 64 bits reads as a float: too far ahead, not "not an integer"
    big = {"topic": "t", "body": "x", "deliver_at": float(1 << 70)}
    assert refusal(parse_message, big, NOW, MessageLimits()) == (422, "out_of_range", "deliver_at")


def test_a_null_key_is_refused():
    assert refusal(parse_message, {"topic": "t", "body": "x", "key": None}, NOW, MessageLimits()) == (
        400,
        "invalid_field",
        "key",
    )


@pytest.mark.parametrize(
    ("headers", "ok"),
    [
        ({"n" * 128: "v" * 896}, True),
        ({"n" * 129: ""}, False),  # was taken: the old rule counted name and value together
        ({"": "v" * 897}, False),
        ({f"h{i}": "" for i in range(33)}, False),
    ],
)
def test_header_names_and_values_have_limits_of_their_own(headers, ok):
    body = {"topic": "t", "body": "x", "headers": headers}
    if ok:
        assert parse_message(body, NOW, MessageLimits()).headers == headers
    else:
        assert refusal(parse_message, body, NOW, MessageLimits()) == (400, "invalid_field", "headers")


@pytest.mark.parametrize("tags", ["*", "", "a", "a||b.c||d-e"])
def test_a_tag_filter_is_all_or_tags_joined_by_bars(tags):
    assert parse_consumer_request("t", {"group": "g", "tags": tags}, "pull")["tags"] == tags


@pytest.mark.parametrize("tags", [None, "\u0084", "a b", " a||b", "a||", "||", "a|||b", "**", 5])
def test_any_other_tag_filter_is_refused(tags):
    """Was taken, and matched nothing ever (a tag has none of these characters)."""
    assert refusal(parse_consumer_request, "t", {"group": "g", "tags": tags}, "pull") == (
        400,
        "invalid_field",
        "tags",
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"topic": "orders\n", "body": "x"}, "topic"),  # "$" let a trailing newline through
        ({"topic": "t", "body": "x", "tags": ["a\n"]}, "tags"),
        ({"topic": "t", "body": "x", "deliver_after": " 90s"}, "deliver_after"),
        ({"topic": "t", "body": "x", "deliver_after": "\u0663s"}, "deliver_after"),  # Arabic-Indic 3
    ],
)
def test_names_tags_and_durations_match_whole_as_the_document_s_patterns_do(body, field):
    """The document's patterns are ECMA-262, where "$" is the end; Python's "$" also matched
    before a final newline, and "\\d" any Unicode digit."""
    assert refusal(parse_message, body, NOW, MessageLimits()) == (400, "invalid_field", field)
    assert refusal(parse_consumer_request, "orders\n", {"group": "g"}, "pull") == (
        400,
        "invalid_field",
        "topic",
    )


def test_a_lowercase_z_is_utc_as_rfc_3339_allows():
    for text in ("2026-01-01T00:00:00Z", "2026-01-01t00:00:00z", "2026-01-01T01:00:00+01:00"):
        msg = parse_message({"topic": "t", "body": "x", "deliver_at": text}, NOW, MessageLimits())
        assert msg.deliver_at_ms == 1_767_225_600_000


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        (
            "group",
            "bad group",
            "group: want a topic or group name: 1-128 of `A-Z a-z 0-9 . _ -`, not starting",
        ),
        ("tags", "a b", 'tags: want `"a||b"`: messages with tag a or b; `"*"` or empty: all'),
    ],
)
def test_a_string_refused_by_its_pattern_is_told_the_rule_in_words(field, value, said):
    """It was told msgspec's "Expected `str` matching regex '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'"."""
    with pytest.raises(ApiError) as e:
        parse_consumer_request("t", {"group": "g", field: value}, "pull")
    assert e.value.body()["error"]["message"].startswith(said), e.value.body()
    assert "regex" not in e.value.body()["error"]["message"]


@pytest.mark.parametrize("field", ["deliver_after", "max_lateness"])
def test_a_duration_of_thousands_of_digits_is_out_of_range_not_a_server_error(field):
    """Python reads at most 4,300 digits into an int: a longer count raised ValueError,
    a 500 that failed a whole batch (the valid items unstored)."""
    body = {"topic": "t", "body": "x", field: "1" * 5000 + "s"}
    if field == "max_lateness":
        body["on_late"] = "drop"
    assert refusal(parse_message, body, NOW, MessageLimits()) == (422, "out_of_range", field)
    body[field] = "0" * 30 + "1s"  # leading zeros count for nothing
    assert parse_message(body, NOW, MessageLimits()) is not None


@pytest.mark.parametrize("catch_up_s", [0, -1.5, 86_400.5])
def test_a_number_outside_its_bounds_is_out_of_range_whether_integer_or_not(catch_up_s):
    """msgspec says "Expected `float` > 0.0" for a float field's bounds, which the rules took
    for the wrong type: 400 invalid_field, where docs/api.md says 422 out_of_range."""
    body = {"node_id": "n4", "raft": "127.0.0.1:7004", "http": "127.0.0.1:8004", "catch_up_s": catch_up_s}
    assert refusal(parse_new_member, body) == (422, "out_of_range", "catch_up_s")
