"""The routes of ``/v1/topics/{topic}/subscriptions/{group}`` (DESIGN §6, Push
subscriptions; docs/api.md, "Push subscriptions"), added to the app by :func:`add_routes`.

Writes and reads go to the master (a follower redirects): the push worker and its counters
live there. Every request is checked (node/http/rules/push.py) before anything is proposed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ..service import NodeService
from .rules.push import parse_names, parse_subscription

Answer = Callable[[int, dict], web.Response]
PATH = "/v1/topics/{topic}/subscriptions/{group}"


def add_routes(
    app: web.Application,
    service: web.AppKey[NodeService],
    answer: Answer,
    json_body: Callable[[web.Request], Awaitable[Any]],
) -> None:
    """As node/http/schedules.py's: the service's app key, and how to answer and read JSON."""

    def names(request: web.Request) -> tuple[str, str]:
        return parse_names(request.match_info["topic"], request.match_info["group"])

    async def put(request: web.Request) -> web.Response:
        """Make the group a push group of the topic, or change where and how it is pushed."""
        svc = request.app[service]
        topic, group = names(request)
        svc.require_master()
        wanted = parse_subscription(topic, group, await json_body(request), svc.push.allow)
        status, body = await svc.subscriptions.put(wanted)
        return answer(status, body)

    async def get(request: web.Request) -> web.Response:
        """A push subscription, without its secret, with this master's counters."""
        svc = request.app[service]
        topic, group = names(request)
        svc.require_master()
        return answer(200, svc.subscriptions.get(topic, group))

    async def delete(request: web.Request) -> web.Response:
        """Stop pushing the group; its progress stays."""
        svc = request.app[service]
        topic, group = names(request)
        svc.require_master()
        return answer(200, await svc.subscriptions.delete(topic, group))

    app.router.add_put(PATH, put)
    app.router.add_get(PATH, get)
    app.router.add_delete(PATH, delete)
