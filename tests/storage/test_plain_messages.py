"""The plain-message path (parse_message's and check_message's) accepts exactly what the
general rules accept, as the same Message, and leaves everything else to them (their
refusal included). A batch's plain path: tests/node/test_plain_batch.py."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from horologe.storage.errors import InvalidFieldError
from horologe.storage.message import MessageLimits
from horologe.storage.message_json import (
    _any_message,
    _are_tag_names,
    _is_name,
    _plain,
    check_message,
    parse_message,
)

NOW = 1_767_225_600_000
LIMITS = MessageLimits(max_body_bytes=64)
MAX_AT = NOW + LIMITS.max_delay_ms

odd = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.lists(st.integers(), max_size=2))
topics = st.one_of(st.sampled_from(["orders", "a", "x.y_z-1", "", "-bad", "a b", "é", "a" * 129]), odd)
bodies = st.one_of(st.text(max_size=70), st.binary(max_size=70), odd)
keys = st.one_of(st.text(max_size=3), st.sampled_from(["k" * 256, "k" * 257]), odd)
times = st.one_of(
    st.sampled_from([0, -1, NOW, MAX_AT, MAX_AT + 1, True, 5.0, "2026-01-01T00:00:00Z"]),
    st.integers(min_value=-(2**64), max_value=2**64),
    odd,
)
items = st.fixed_dictionaries(
    {},
    optional={
        "topic": topics,
        "body": bodies,
        "key": keys,
        "deliver_at": times,
        "tags": st.one_of(
            st.sampled_from([[], ["t"], ["t", "vip"], ["t"] * 17, ["a b"], [""], "t", "", (), {}]),
            st.lists(st.one_of(st.sampled_from(["t", "x.y_z-1", "é"]), odd), max_size=3),
            odd,
        ),
        "deliver_after": st.sampled_from(["5s", 10]),
        "body_b64": st.sampled_from(["eA==", "!"]),
    },
)


def _plain_message(obj, now, limits):
    """The Message the plain path makes of ``obj``; None when it leaves it to the general rules."""
    return None if _plain(obj, now, limits) is None else parse_message(obj, now, limits)


def _general(obj):
    try:
        return _any_message(obj, NOW, LIMITS)
    except InvalidFieldError as e:
        return e.code, e.field


@settings(max_examples=3000, deadline=None)
@given(st.one_of(items, odd, st.text(max_size=3)))
@example({"topic": "orders", "body": "x", "tags": ()})  # a tuple, from a Python caller
@example({"topic": "orders", "body": "x", "tags": ["t" * 65]})
def test_the_plain_path_agrees_with_the_general_rules(obj):
    plain = _plain_message(obj, NOW, LIMITS)
    if plain is not None:
        assert plain == _general(obj)
        assert parse_message(obj, NOW, LIMITS) is not None


@settings(max_examples=500, deadline=None)
@given(
    st.fixed_dictionaries(
        {"topic": st.sampled_from(["orders", "-bad"]), "body": st.sampled_from([b"x", "y", b"z" * 65])},
        optional={
            "key": keys,
            "deliver_at": times,
            "tags": st.sampled_from([[], ["t"], ["a b"], ["t"] * 17]),
        },
    )
)
def test_near_misses_of_a_plain_message_are_judged_alike(obj):
    plain = _plain_message(obj, NOW, LIMITS)
    general = _general(obj)
    if plain is not None:
        assert plain == general
    plain_types = type(obj.get("deliver_at", 0)) is int and type(obj.get("key", "")) is str
    if plain_types and not isinstance(general, tuple):
        assert plain is not None  # plain in every respect: the plain path takes it


@settings(max_examples=1000, deadline=None)
@given(st.one_of(items, odd))
@example({"topic": "orders", "body": "x", "tags": ()})
def test_check_message_refuses_what_the_general_rules_refuse(obj):
    def outcome(parse):
        try:
            parse(obj, NOW, LIMITS)
        except InvalidFieldError as e:
            return e.code, e.field, e.message
        return None

    assert outcome(check_message) == outcome(_any_message)


def test_the_caches_hold_only_what_could_be_a_name_or_tags():
    """A client's oversized topic or tags are refused without a look-up in a cache, which
    would keep them alive."""
    huge = "t" * 1_000_000
    for obj, cache in (
        ({"topic": huge, "body": "x"}, _is_name),
        ({"topic": "orders", "body": "x", "tags": [huge]}, _are_tag_names),
    ):
        calls = cache.cache_info()
        assert _plain_message(obj, NOW, LIMITS) is None
        assert isinstance(_general(obj), tuple)
        assert cache.cache_info() == calls


def test_what_the_sdk_sends_takes_the_plain_path():
    obj = {"topic": "orders", "key": "0123abcd", "body": b"x" * 10, "deliver_at": NOW + 1_000}
    assert _plain_message(obj, NOW, LIMITS) == _any_message(obj, NOW, LIMITS)
    tagged = {**obj, "tags": ["timeout", "vip"]}  # what spark schedule sends
    assert _plain_message(tagged, NOW, LIMITS) == _any_message(tagged, NOW, LIMITS)
    assert _plain_message(tagged, NOW, LIMITS).tags == ("timeout", "vip")
    assert _plain_message({"topic": "orders", "body": "hi"}, NOW, LIMITS).deliver_at_ms == NOW
