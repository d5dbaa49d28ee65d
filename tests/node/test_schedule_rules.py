"""The request rules of POST /v1/schedules: each refusal with its status, code and field,
before anything is proposed (node/http/rules/schedules.py)."""

from __future__ import annotations

import pytest

from horologe.node.http.errors import ApiError
from horologe.node.http.rules.schedules import parse_name, parse_schedule
from horologe.storage.message import MessageLimits

NOW = 1_767_225_600_000
GOOD = {
    "name": "nightly",
    "topic": "reports",
    "body": "run",
    "cron": "0 2 * * *",
    "timezone": "Europe/Berlin",
}


def parse(**changes):
    body = {k: v for k, v in {**GOOD, **changes}.items() if v is not ...}
    return parse_schedule(body, NOW, MessageLimits())


def refused(**changes) -> tuple[int, str, str | None]:
    with pytest.raises(ApiError) as e:
        parse(**changes)
    return e.value.status, e.value.code, e.value.field


def test_a_good_schedule():
    d = parse(tags=["a"], headers={"h": "v"}, start_at="2026-02-01T00:00:00Z", end_at=NOW + 86_400_000 * 60)
    assert (d.name, d.topic, d.body, d.cron, d.timezone, d.tags, d.headers) == (
        "nightly",
        "reports",
        b"run",
        "0 2 * * *",
        "Europe/Berlin",
        ("a",),
        {"h": "v"},
    )
    assert d.start_at == 1_769_904_000_000 and not d.paused and d.incarnation == 0
    assert parse(body=..., body_b64="AAE=").body == b"\x00\x01"
    assert parse(cron="*/10 * * * * *").cron == "*/10 * * * * *"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"name": "bad name"}, (400, "invalid_field", "name")),
        ({"name": "ok\n"}, (400, "invalid_field", "name")),  # matched whole
        ({"name": ...}, (400, "invalid_field", "name")),
        ({"topic": "-x"}, (400, "invalid_field", "topic")),
        ({"body_b64": "AAE="}, (400, "invalid_field", "body")),  # both
        ({"body": ...}, (400, "invalid_field", "body")),  # neither
        ({"body": "x" * (256 * 1024 + 1)}, (413, "too_large", "body")),
        ({"deliver_at": NOW}, (400, "unknown_field", "deliver_at")),
        ({"key": "k"}, (400, "unknown_field", "key")),
        ({"cron": ...}, (400, "invalid_field", "cron")),
        ({"cron": "every day"}, (400, "invalid_field", "cron")),
        ({"cron": "0  2 * * *"}, (400, "invalid_field", "cron")),  # one space apart
        ({"cron": "0 2 * * * * *"}, (400, "invalid_field", "cron")),
        ({"cron": "H 2 * * *"}, (400, "invalid_field", "cron")),
        ({"cron": 5}, (400, "invalid_field", "cron")),
        ({"cron": "0 0 30 2 *"}, (422, "out_of_range", "cron")),  # never fires
        ({"timezone": "Mars/Olympus"}, (400, "invalid_field", "timezone")),
        ({"timezone": ...}, (400, "invalid_field", "timezone")),
        ({"timezone": None}, (400, "invalid_field", "timezone")),
        ({"timezone": [None, None]}, (400, "invalid_field", "timezone")),  # unhashable (was a 500)
        ({"cron": ["* * * * *"]}, (400, "invalid_field", "cron")),
        ({"start_at": NOW, "end_at": NOW}, (400, "invalid_range", "end_at")),
        ({"start_at": NOW + 1, "end_at": NOW}, (400, "invalid_range", "end_at")),
        ({"start_at": -1}, (422, "out_of_range", "start_at")),
        ({"end_at": 1 << 62}, (422, "out_of_range", "end_at")),
        ({"start_at": "tomorrow"}, (400, "invalid_field", "start_at")),
        ({"start_at": None}, (400, "invalid_field", "start_at")),
        ({"headers": {f"h{i}": "" for i in range(32)}}, (400, "invalid_field", "headers")),
        ({"headers": {"X-Horologe-Schedule": "spoof"}}, (400, "invalid_field", "headers")),
    ],
)
def test_refusals(changes, expected):
    assert refused(**changes) == expected


def test_not_an_object():
    with pytest.raises(ApiError) as e:
        parse_schedule(["nightly"], NOW, MessageLimits())
    assert (e.value.status, e.value.code) == (400, "invalid_body")


def test_names_in_paths_follow_the_same_rule():
    assert parse_name("nightly.v2") == "nightly.v2"
    with pytest.raises(ApiError) as e:
        parse_name("a/b")
    assert (e.value.status, e.value.field) == (400, "name")
