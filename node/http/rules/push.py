"""The request rules of ``PUT /v1/topics/{topic}/subscriptions/{group}`` (DESIGN §6, Push
subscriptions), refusing with the API's error shape before anything is proposed: a
refused request never reaches the Raft log.

The URL must be ``http`` or ``https`` with a host, and no user or password (GET shows the
URL; receivers authenticate the sender by the signature). Its host must be allowed by this
node's ``push_allow`` (node/push/allow.py), else 422 ``push_target_not_allowed``.
"""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlsplit

from msgspec import Meta
from yarl import URL

from horologe.cluster.push_state import PushDef
from horologe.storage.message_json import refusal

from ...push.allow import CONFIG_KEY, PushAllow
from .messages import TAG_FILTER_PATTERN, answered_over_http
from .model import Body, decode, matching

MAX_URL = 2048
URL_PATTERN = r"https?://[^\s/?#@]+(?:[/?#][^\s]*)?"  # no "@" before the path: no user or password
SECRET_PATTERN = r"[!-~]{16,256}"  # printable ASCII, no spaces
NOT_ALLOWED = "push_target_not_allowed"


class Push(Body):
    url: Annotated[
        str,
        matching(
            URL_PATTERN,
            max_length=MAX_URL,
            description="http:// or https://, no user or password; its host must be allowed by the master's "
            "`push_allow` (422 `push_target_not_allowed` otherwise)",
        ),
    ]
    secret: Annotated[
        str,
        matching(
            SECRET_PATTERN,
            description="16-256 printable ASCII characters: the key of `Horologe-Signature`. "
            "Never answered back",
        ),
    ]
    timeout_ms: Annotated[
        int, Meta(ge=100, le=60_000, description="a request not answered by then failed")
    ] = 10_000
    max_in_flight: Annotated[int, Meta(ge=1, le=1000, description="requests open at once, at most")] = 10
    rate_per_s: Annotated[
        int, Meta(ge=0, le=100_000, description="requests started per second, at most; 0: no limit")
    ] = 0
    tags: Annotated[
        str,
        matching(
            TAG_FILTER_PATTERN,
            description='as a pull takes it: `"a||b"`, or `"*"` (the default) for every message',
        ),
    ] = "*"


class NewSubscription(Body):
    push: Push


@answered_over_http
def parse_subscription(topic: str, group: str, obj, allow: PushAllow) -> PushDef:
    """A PUT's body as the definition to propose (no clock, no incarnation yet)."""
    push = decode(NewSubscription, obj).push
    url = target_url(push.url)
    if not allow.allows(url.raw_host):
        raise refusal(
            f"the host {url.raw_host!r} is not allowed as a push target: an operator must add it (or "
            f"a CIDR holding it) to {CONFIG_KEY} in the node config",
            "push.url",
            NOT_ALLOWED,
        )
    numbers = {k: getattr(push, k) for k in ("timeout_ms", "max_in_flight", "rate_per_s")}
    return PushDef(topic, group, str(url), push.secret, tags=push.tags or "*", **numbers)


def target_url(value: str) -> URL:
    """A push URL that ``Push.url``'s pattern took (``http(s)://host[:port][/path][?query]``,
    no user or password: GET shows the URL), if it parses, with a port of 1-65535 written
    in digits (yarl reads ``:1_0`` as 10, and ``:0`` would be sent to the scheme's port)."""
    try:
        url = URL(value)
        url.port  # noqa: B018 - a port out of range raises here
    except ValueError as e:
        raise refusal(f"url is not a URL: {e}", "push.url") from e
    port_text = PORT_AT_END.search(urlsplit(value).netloc)
    if url.explicit_port is not None and (port_text is None or not 1 <= url.explicit_port <= 65535):
        raise refusal("url's port must be a number from 1 to 65535", "push.url")
    return url  # yarl refuses an http(s) URL without a host


PORT_AT_END = re.compile(r":[0-9]{1,5}$")  # an authority's port, as digits
