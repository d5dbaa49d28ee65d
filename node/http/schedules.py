"""The routes of ``/v1/schedules`` (DESIGN §6, Schedule management; docs/api.md, "Recurring
schedules").

Writes and reads alike go to the master, as message reads do: a follower redirects.
Every request is checked (node/http/rules/schedules.py) before anything is proposed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from ..service import NodeService
from .common import SERVICE, answer, json_body
from .rules.schedules import parse_name, parse_schedule

routes = web.RouteTableDef()


@routes.post("/v1/schedules")
async def create(request: web.Request) -> web.Response:
    """Create a recurring schedule."""
    svc = request.app[SERVICE]
    svc.require_master()
    wanted = parse_schedule(await json_body(request), svc.clock(), svc.limits)
    status, body = await svc.schedules.create(wanted)
    return answer(status, body)


@routes.get("/v1/schedules")
async def list_all(request: web.Request) -> web.Response:
    """Every schedule, by name."""
    svc = request.app[SERVICE]
    svc.require_master()
    return answer(200, {"schedules": svc.schedules.list()})


@routes.get("/v1/schedules/{name}")
async def get_one(request: web.Request) -> web.Response:
    """One schedule, with its next five fire times."""
    svc = request.app[SERVICE]
    name = parse_name(request.match_info["name"])
    svc.require_master()
    return answer(200, svc.schedules.get(name))


def _action(act: Callable[[NodeService, str], Awaitable[dict]]):
    async def handle(request: web.Request) -> web.Response:
        svc = request.app[SERVICE]
        name = parse_name(request.match_info["name"])
        svc.require_master()
        return answer(200, await act(svc, name))

    return handle


routes.delete("/v1/schedules/{name}")(_action(lambda svc, name: svc.schedules.delete(name)))
routes.post("/v1/schedules/{name}/pause")(_action(lambda svc, name: svc.schedules.pause(name)))
routes.post("/v1/schedules/{name}/resume")(_action(lambda svc, name: svc.schedules.resume(name)))
