"""The request rules of ``PUT /v1/topics/{topic}/subscriptions/{group}`` (DESIGN §6, Push
subscriptions), refusing with the API's error shape before anything is proposed: a
refused request never reaches the Raft log.

The URL must be ``http`` or ``https`` with a host, and no user or password (GET shows the
URL; receivers authenticate the sender by the signature). Its host must be allowed by this
node's ``push_allow`` (node/push/allow.py), else 422 ``push_target_not_allowed``.
"""

from __future__ import annotations

import re

from yarl import URL

from horologe.cluster.push_state import PushDef
from horologe.storage.message_json import TOPIC_RE, int_field, json_object, refusal

from ...push.allow import CONFIG_KEY, PushAllow
from .messages import TAG_FILTER_RE, answered_over_http

FIELDS = {"url", "secret", "timeout_ms", "max_in_flight", "rate_per_s", "tags"}
MAX_URL = 2048
URL_PATTERN = r"https?://[^\s/?#@]+(?:[/?#][^\s]*)?"  # no "@" before the path: no user or password
URL_RE = re.compile(URL_PATTERN)
SECRET_PATTERN = r"[!-~]{16,256}"  # printable ASCII, no spaces
SECRET_RE = re.compile(SECRET_PATTERN)
# name: (default, low, high)
NUMBERS = {
    "timeout_ms": (10_000, 100, 60_000),
    "max_in_flight": (10, 1, 1000),
    "rate_per_s": (0, 0, 100_000),  # 0: no limit
}
NOT_ALLOWED = "push_target_not_allowed"


@answered_over_http
def parse_names(topic: str, group: str) -> tuple[str, str]:
    """The topic and group of the path: names, as a pull takes them."""
    for field, value in (("topic", topic), ("group", group)):
        if not TOPIC_RE.fullmatch(value):
            raise refusal(f"{field} must be 1-128 of A-Z a-z 0-9 . _ - (not starting with . _ -)", field)
    return topic, group


@answered_over_http
def parse_subscription(topic: str, group: str, obj, allow: PushAllow) -> PushDef:
    """A PUT's body as the definition to propose (no clock, no incarnation yet)."""
    obj = json_object(obj, {"push"}, "body")
    if "push" not in obj:
        raise refusal("push is required: {push: {url, secret, ...}}", "push")
    push = obj["push"]
    if not isinstance(push, dict):
        raise refusal("push must be an object {url, secret, ...}", "push")
    unknown = sorted(set(push) - FIELDS)
    if unknown:
        raise refusal(f"unknown field {unknown[0]!r}", f"push.{unknown[0]}", "unknown_field")
    url = target_url(push.get("url"))
    secret = push.get("secret")
    if not isinstance(secret, str) or not SECRET_RE.fullmatch(secret):
        raise refusal("secret must be 16-256 printable ASCII characters, no spaces", "push.secret")
    numbers = {}
    for name, (default, low, high) in NUMBERS.items():
        value = int_field(push.get(name, default), f"push.{name}")
        if not low <= value <= high:
            raise refusal(f"{name} must be {low}..{high}", f"push.{name}", "out_of_range")
        numbers[name] = value
    tags = push.get("tags", "*")
    if not isinstance(tags, str) or not TAG_FILTER_RE.fullmatch(tags):
        raise refusal('tags must be "*", or tags joined by "||" like "a||b"', "push.tags")
    if not allow.allows(url.host):
        raise refusal(
            f"the host {url.host!r} is not allowed as a push target: an operator must add it (or "
            f"a CIDR holding it) to {CONFIG_KEY} in the node config",
            "push.url",
            NOT_ALLOWED,
        )
    return PushDef(topic, group, str(url), secret, tags=tags or "*", **numbers)


def target_url(value) -> URL:
    """A push URL: ``http(s)://host[:port][/path][?query]``; ``URL_PATTERN`` leaves out a
    user or password (GET shows the URL)."""
    if not isinstance(value, str) or len(value) > MAX_URL or not URL_RE.fullmatch(value):
        raise refusal(f"url must be an http(s):// URL with a host, at most {MAX_URL} characters", "push.url")
    try:
        url = URL(value)
        url.port  # noqa: B018 - a port out of range raises here
    except ValueError as e:
        raise refusal(f"url is not a URL: {e}", "push.url") from e
    return url  # yarl refuses an http(s) URL without a host
