"""Push subscriptions in the SDK: ``put_subscription``, ``subscription`` and
``delete_subscription`` (docs/api.md, "Push subscriptions"), for
:class:`~horologe.client.Client` and, awaitable, for :class:`~horologe.client.AsyncClient`.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True)
class PushSubscription:
    """A push subscription as the master shows it: never its secret."""

    topic: str
    group: str
    url: str
    timeout_ms: int
    max_in_flight: int
    rate_per_s: int  # 0: no limit
    tags: str
    allowed: bool  # whether the master's push_allow lets it send to url
    created_at: int
    updated_at: int
    counters: dict[str, int]  # delivered, retried, dead_lettered, in_flight (this master's)
    unacked: int  # the backlog: messages of the topic the group has not acked

    @classmethod
    def from_json(cls, d: dict) -> PushSubscription:
        p = d["push"]
        return cls(
            d["topic"],
            d["group"],
            p["url"],
            p["timeout_ms"],
            p["max_in_flight"],
            p["rate_per_s"],
            p["tags"],
            d["allowed"],
            d["created_at"],
            d["updated_at"],
            dict(d["counters"]),
            d["unacked"],
        )


def subscription_body(url: str, secret: str, **options) -> dict:
    """``{push: {...}}``; options left None are left out (the server's defaults)."""
    push = {"url": url, "secret": secret}
    push.update({k: v for k, v in options.items() if v is not None})
    return {"push": push}


def path(topic: str, group: str) -> str:
    return f"/v1/topics/{quote(topic, safe='')}/subscriptions/{quote(group, safe='')}"


class PushCalls:
    """The push subscription calls of the blocking client (it supplies ``_call``)."""

    def put_subscription(
        self,
        topic: str,
        group: str,
        url: str,
        secret: str,
        *,
        timeout_ms: int | None = None,
        max_in_flight: int | None = None,
        rate_per_s: int | None = None,
        tags: str | None = None,
    ) -> PushSubscription:
        """Make ``group`` a push group of ``topic``: the master POSTs its messages to ``url``,
        signed with ``secret``. Putting it again replaces it. InvalidRequestError when the
        URL's host is not in the master's push_allow (``push_target_not_allowed``)."""
        wire = subscription_body(
            url, secret, timeout_ms=timeout_ms, max_in_flight=max_in_flight, rate_per_s=rate_per_s, tags=tags
        )
        return PushSubscription.from_json(self._call("PUT", path(topic, group), wire))

    def subscription(self, topic: str, group: str) -> PushSubscription:
        """The subscription, with the master's counters; NotFoundError when there is none."""
        return PushSubscription.from_json(self._call("GET", path(topic, group)))

    def delete_subscription(self, topic: str, group: str) -> None:
        """Stop pushing the group (its progress stays); not resent after a timeout."""
        self._call("DELETE", path(topic, group), resend=False)


class AsyncPushCalls:
    """The push subscription calls of the asyncio client: see :class:`PushCalls`."""

    async def put_subscription(
        self, topic: str, group: str, url: str, secret: str, **options
    ) -> PushSubscription:
        """Options: timeout_ms, max_in_flight, rate_per_s, tags (see :meth:`PushCalls.put_subscription`)."""
        wire = subscription_body(url, secret, **options)
        return PushSubscription.from_json(await self._call("PUT", path(topic, group), wire))

    async def subscription(self, topic: str, group: str) -> PushSubscription:
        return PushSubscription.from_json(await self._call("GET", path(topic, group)))

    async def delete_subscription(self, topic: str, group: str) -> None:
        await self._call("DELETE", path(topic, group), resend=False)
