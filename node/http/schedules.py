"""The routes of ``/v1/schedules`` (DESIGN §6, Schedule management; docs/api.md, "Recurring
schedules"), added to the app by :func:`add_routes`.

Writes and reads alike go to the master, as message reads do: a follower redirects.
Every request is checked (node/http/rules/schedules.py) before anything is proposed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ..service import NodeService
from .rules.schedules import parse_name, parse_schedule

Answer = Callable[[int, dict], web.Response]


def add_routes(
    app: web.Application,
    service: web.AppKey[NodeService],
    answer: Answer,
    json_body: Callable[[web.Request], Awaitable[Any]],
) -> None:
    """``service``: the app's key of the NodeService; ``answer(status, body)`` a JSON
    response; ``json_body(request)`` the request's JSON (refused with the API's errors)."""

    async def create(request: web.Request) -> web.Response:
        """Create a recurring schedule."""
        svc = request.app[service]
        svc.require_master()
        wanted = parse_schedule(await json_body(request), svc.clock(), svc.limits)
        status, body = await svc.schedules.create(wanted)
        return answer(status, body)

    async def list_all(request: web.Request) -> web.Response:
        """Every schedule, by name."""
        svc = request.app[service]
        svc.require_master()
        return answer(200, {"schedules": svc.schedules.list()})

    async def get_one(request: web.Request) -> web.Response:
        """One schedule, with its next five fire times."""
        svc = request.app[service]
        name = parse_name(request.match_info["name"])
        svc.require_master()
        return answer(200, svc.schedules.get(name))

    def action(act: Callable[[NodeService, str], Awaitable[dict]]):
        async def handle(request: web.Request) -> web.Response:
            svc = request.app[service]
            name = parse_name(request.match_info["name"])
            svc.require_master()
            return answer(200, await act(svc, name))

        return handle

    app.router.add_post("/v1/schedules", create)
    app.router.add_get("/v1/schedules", list_all)
    app.router.add_get("/v1/schedules/{name}", get_one)
    app.router.add_delete("/v1/schedules/{name}", action(lambda svc, name: svc.schedules.delete(name)))
    app.router.add_post("/v1/schedules/{name}/pause", action(lambda svc, name: svc.schedules.pause(name)))
    app.router.add_post("/v1/schedules/{name}/resume", action(lambda svc, name: svc.schedules.resume(name)))
