"""The routes of ``/v1/topics/{topic}/subscriptions/{group}`` (DESIGN §6, Push
subscriptions; docs/api.md, "Push subscriptions").

Writes and reads go to the master (a follower redirects): the push worker and its counters
live there. Every request is checked (node/http/rules/push.py) before anything is proposed.
"""

from __future__ import annotations

from aiohttp import web

from .common import SERVICE, answer, json_body
from .rules.push import parse_names, parse_subscription

routes = web.RouteTableDef()
PATH = "/v1/topics/{topic}/subscriptions/{group}"


def _names(request: web.Request) -> tuple[str, str]:
    return parse_names(request.match_info["topic"], request.match_info["group"])


@routes.put(PATH)
async def put(request: web.Request) -> web.Response:
    """Make the group a push group of the topic, or change where and how it is pushed."""
    svc = request.app[SERVICE]
    topic, group = _names(request)
    svc.require_master()
    wanted = parse_subscription(topic, group, await json_body(request), svc.push.allow)
    status, body = await svc.subscriptions.put(wanted)
    return answer(status, body)


@routes.get(PATH)
async def get(request: web.Request) -> web.Response:
    """A push subscription, without its secret, with this master's counters."""
    svc = request.app[SERVICE]
    topic, group = _names(request)
    svc.require_master()
    return answer(200, svc.subscriptions.get(topic, group))


@routes.delete(PATH)
async def delete(request: web.Request) -> web.Response:
    """Stop pushing the group; its progress stays."""
    svc = request.app[SERVICE]
    topic, group = _names(request)
    svc.require_master()
    return answer(200, await svc.subscriptions.delete(topic, group))
