"""A batch's messages as the SDK sends them: the same whether an item takes the plain
short path of ``batch_bodies`` or ``message_body``; keys made up where none is given."""

from __future__ import annotations

import re

import pytest

from horologe.client.core import batch_bodies, message_body
from horologe.client.schedules import schedule_body

ITEMS = [
    {"topic": "t", "body": "x", "key": "k1"},
    {"topic": "t", "body": b"\x00\xff", "key": "k2", "deliver_at": 5},
    {"topic": "t", "body": "x", "key": "k3", "deliver_after": "5s", "delay_level": None},
    {"topic": "t", "body": "x", "key": "k4", "delay_level": 3, "deliver_at": None},
    {"topic": "t", "body": bytearray(b"ab"), "key": "k5"},  # not plain: made bytes
    {"topic": "t", "body": "x", "key": "k6", "tags": ["a"], "headers": {"h": "v"}},  # not plain
    {"topic": "t", "body": "x", "key": "k7", "tags": ["a", "b"], "deliver_at": 5},
    {"topic": "t", "body": "x", "key": "k8", "tags": []},  # not plain: dropped
    {"topic": "t", "body": "x", "key": "k9", "tags": ("a",)},  # not plain: made a list
    {"topic": "t", "body": "x", "key": "k10", "tags": None},
]


def test_each_item_is_what_message_body_makes_of_it():
    assert batch_bodies(ITEMS) == [message_body(**m) for m in ITEMS]
    assert batch_bodies(ITEMS)[4]["body"] == b"ab"


def test_items_without_a_key_get_a_fresh_one_each():
    made = batch_bodies([{"topic": "t", "body": "x"}, {"topic": "t", "body": "y", "key": ""}, ITEMS[5]])
    keys = [m["key"] for m in made]
    assert keys[2] == "k6" and keys[0] != keys[1]
    assert all(re.fullmatch("[0-9a-f]{32}", k) for k in keys[:2])
    assert made[0] == {"topic": "t", "body": "x", "key": keys[0]}


@pytest.mark.parametrize("item", [{"body": "x"}, {"topic": "t", "body": 7}, {"topic": "t", "body": None}])
def test_what_message_body_refuses_is_refused_alike(item):
    with pytest.raises(TypeError):
        message_body(**{**item, "key": "k"})
    with pytest.raises(TypeError):
        batch_bodies([item])


def test_tags_given_as_one_str_are_one_tag_not_its_characters():
    """``tags="urgent"`` (as a pull's filter is written) was sent as six tags, u r g e n t:
    a group pulling with the filter ``urgent`` then skipped the message for good."""
    assert message_body("t", "x", key="k", tags="urgent")["tags"] == ["urgent"]
    assert batch_bodies([{"topic": "t", "body": "x", "key": "k", "tags": "urgent"}])[0]["tags"] == ["urgent"]
    assert schedule_body("s", "t", "x", "0 * * * *", "UTC", tags="daily")["tags"] == ["daily"]
