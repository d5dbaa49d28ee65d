"""The routes of ``/v1/topics/{topic}/subscriptions/{group}`` (DESIGN §6, Push
subscriptions; docs/api.md, "Push subscriptions").

Writes and reads go to the master (a follower redirects): the push worker and its counters
live there. Every request is checked (node/http/rules/push.py) before anything is proposed.
"""

from __future__ import annotations

from aiohttp import web

from .common import SERVICE, answer, json_body
from .openapi.operations import (
    CLIENT,
    SUBSCRIPTION,
    SUBSCRIPTIONS,
    operation,
    response_doc,
    subscription_operation,
)
from .route_table import RouteTable
from .rules.messages import parse_names
from .rules.push import parse_subscription

routes = RouteTable()
PATH = "/v1/topics/{topic}/subscriptions/{group}"


def _names(request: web.Request) -> tuple[str, str]:
    return parse_names(request.match_info["topic"], request.match_info["group"])


@routes.put(
    PATH,
    operation(
        "put_subscription",
        SUBSCRIPTIONS,
        "Make the group a push group of the topic: its messages are POSTed, signed, to `push.url`",
        CLIENT,
        {
            "201": response_doc("Created; the master starts pushing.", "Subscription"),
            "200": response_doc("Replaced (pushing starts over with it), or the same again.", "Subscription"),
        },
        body="NewSubscription",
        parameters=SUBSCRIPTION,
        errors=("Conflict", "Unprocessable"),
        description="422 `push_target_not_allowed`: the URL's host is not in the master's node config "
        "`push_allow` (empty by default: nothing may be pushed until an operator allows a target); "
        "400 `invalid_field` on `push.url` for a URL the pattern lets through that is no URL (a port "
        "out of range, a user or password); 409 `too_many_subscriptions` past 1,000.",
    ),
)
async def put(request: web.Request) -> web.Response:
    """Make the group a push group of the topic, or change where and how it is pushed."""
    svc = request.app[SERVICE]
    topic, group = _names(request)
    wanted = parse_subscription(topic, group, await json_body(request), svc.push.allow)
    status, body = await svc.subscriptions.put(wanted)
    return answer(status, body)


@routes.get(
    PATH,
    subscription_operation(
        "get_subscription",
        "A push subscription, without its secret, with the master's counters",
        {"200": response_doc("The subscription.", "Subscription")},
    ),
)
async def get(request: web.Request) -> web.Response:
    """A push subscription, without its secret, with this master's counters."""
    svc = request.app[SERVICE]
    topic, group = _names(request)
    return answer(200, svc.subscriptions.get(topic, group))


@routes.delete(
    PATH,
    subscription_operation(
        "delete_subscription",
        "Stop pushing the group; its progress stays",
        {"200": response_doc("Deleted.", "SubscriptionDeleted")},
    ),
)
async def delete(request: web.Request) -> web.Response:
    """Stop pushing the group; its progress stays."""
    svc = request.app[SERVICE]
    topic, group = _names(request)
    return answer(200, await svc.subscriptions.delete(topic, group))
