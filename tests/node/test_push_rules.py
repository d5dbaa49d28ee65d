"""The request rules of PUT /v1/topics/{topic}/subscriptions/{group} and the node config's
push_allow: each refusal with its status, code and field, before anything is proposed
(node/http/rules/push.py, node/push/allow.py)."""

from __future__ import annotations

import pytest

from horologe.node.http.errors import ApiError
from horologe.node.http.rules.messages import parse_names
from horologe.node.http.rules.push import parse_subscription
from horologe.node.push.allow import PushAllow

SECRET = "0123456789abcdef"
LOCAL = PushAllow(("127.0.0.1/32", "hooks.example.com", "*.example.org", "fd00::/8"))


def parse(allow: PushAllow = LOCAL, **push):
    body = {"push": {"url": "http://127.0.0.1:8000/hook", "secret": SECRET, **push}}
    body["push"] = {k: v for k, v in body["push"].items() if v is not ...}
    return parse_subscription("orders", "hooks", body, allow)


def refused(allow: PushAllow = LOCAL, **push) -> tuple[int, str, str | None]:
    with pytest.raises(ApiError) as e:
        parse(allow, **push)
    return e.value.status, e.value.code, e.value.field


def test_a_good_subscription_with_its_defaults():
    d = parse()
    assert (d.topic, d.group, d.url, d.secret) == ("orders", "hooks", "http://127.0.0.1:8000/hook", SECRET)
    assert (d.timeout_ms, d.max_in_flight, d.rate_per_s, d.tags) == (10_000, 10, 0, "*")
    d = parse(
        url="https://hooks.example.com/x?y=1", timeout_ms=100.0, max_in_flight=1000, rate_per_s=5, tags="a||b"
    )
    assert (d.url, d.timeout_ms, d.max_in_flight, d.rate_per_s, d.tags) == (
        "https://hooks.example.com/x?y=1",
        100,
        1000,
        5,
        "a||b",
    )
    assert parse(url="http://a.b.example.org/").url == "http://a.b.example.org/"
    assert parse(url="http://[fd00::1]:9/").url == "http://[fd00::1]:9/"


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1/",  # no CIDR holds it
        "http://localhost:8000/",  # a name is matched by name, never resolved
        "http://example.org/",  # *.example.org is the names below it
        "http://evil.hooks.example.com/",
        "http://[::1]/",
    ],
)
def test_a_host_the_allow_list_leaves_out_is_422_naming_the_config_key(url):
    with pytest.raises(ApiError) as e:
        parse(url=url)
    assert (e.value.status, e.value.code, e.value.field) == (422, "push_target_not_allowed", "push.url")
    assert "push_allow" in e.value.message


def test_an_empty_allow_list_allows_nothing():
    assert refused(PushAllow(()))[:2] == (422, "push_target_not_allowed")


@pytest.mark.parametrize(
    "url",
    [
        "ftp://127.0.0.1/",
        "file:///etc/passwd",
        "127.0.0.1:8000/hook",
        "http://",
        "http://:80/",
        "http://user:pw@127.0.0.1/",
        "http://127.0.0.1:99999/",
        "http://127.0.0.1:0/",  # pushed to port 80, its Host header saying :0
        "http://127.0.0.1:1_0/",  # read as port 10
        "http://127.0.0.1/a b",
        "http://127.0.0.1/" + "x" * 2048,
        5,
        None,
    ],
)
def test_a_url_that_is_not_http_or_https_with_a_host_is_400(url):
    assert refused(url=url) == (400, "invalid_field", "push.url")


@pytest.mark.parametrize(
    "push, want",
    [
        ({"secret": "short"}, (400, "invalid_field", "push.secret")),
        ({"secret": "has a space in it ok"}, (400, "invalid_field", "push.secret")),
        ({"secret": ...}, (400, "invalid_field", "push.secret")),
        ({"timeout_ms": 99}, (422, "out_of_range", "push.timeout_ms")),
        ({"timeout_ms": "1s"}, (400, "invalid_field", "push.timeout_ms")),
        ({"max_in_flight": 0}, (422, "out_of_range", "push.max_in_flight")),
        ({"max_in_flight": True}, (400, "invalid_field", "push.max_in_flight")),
        ({"rate_per_s": -1}, (422, "out_of_range", "push.rate_per_s")),
        ({"tags": "a | b"}, (400, "invalid_field", "push.tags")),
        ({"colour": "red"}, (400, "unknown_field", "push.colour")),
    ],
)
def test_each_field_is_checked(push, want):
    assert refused(**push) == want


def test_the_body_shape_is_checked():
    for body, field in (([], None), ({}, "push"), ({"push": "x"}, "push"), ({"push": {}, "x": 1}, "x")):
        with pytest.raises(ApiError) as e:
            parse_subscription("orders", "hooks", body, LOCAL)
        assert e.value.status == 400 and e.value.field == field, body


def test_the_path_names_are_checked():
    assert parse_names("orders", "hooks") == ("orders", "hooks")
    for topic, group, field in (("%DLQ%x", "g", "topic"), ("t", ".g", "group")):
        with pytest.raises(ApiError) as e:
            parse_names(topic, group)
        assert (e.value.status, e.value.field) == (400, field)


def test_an_international_host_name_is_allowed_by_its_ascii_name():
    """The allow list's names are ASCII (xn-- for an international one); a URL's host was
    compared decoded (bücher.example), and no entry could ever allow it."""
    allow = PushAllow(("xn--bcher-kva.example",))
    for url in ("http://xn--bcher-kva.example/hook", "http://bücher.example/hook"):
        assert parse(allow, url=url).url == "http://xn--bcher-kva.example/hook"
    assert refused(PushAllow(("example.com",)), url="http://bücher.example/")[1] == "push_target_not_allowed"
