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
from .openapi.operations import CLIENT, SCHEDULES, by_name_operation, operation, response_doc
from .route_table import RouteTable
from .rules.schedules import parse_name, parse_schedule

routes = RouteTable()


@routes.post(
    "/v1/schedules",
    operation(
        "create_schedule",
        SCHEDULES,
        "Create a recurring schedule: a message to its topic at every fire time of its cron, in its zone",
        CLIENT,
        {
            "201": response_doc("Created; firings are planned from now (or from `start_at`).", "Schedule"),
            "200": response_doc(
                "A schedule of that name and the same definition exists (a create retried).", "Schedule"
            ),
        },
        body="NewSchedule",
        errors=("Conflict", "Unprocessable"),
        description="409 `schedule_exists` (the name taken by another definition) or `too_many_schedules`; "
        "400 `invalid_field` on `cron` or `timezone`, `invalid_range` when `end_at` is not after `start_at`; "
        "422 `out_of_range`: a cron that never fires, a time before 1970 or past 9999.",
    ),
)
async def create(request: web.Request) -> web.Response:
    """Create a recurring schedule."""
    svc = request.app[SERVICE]
    wanted = parse_schedule(await json_body(request), svc.clock(), svc.limits)
    status, body = await svc.schedules.create(wanted)
    return answer(status, body)


@routes.get(
    "/v1/schedules",
    operation(
        "list_schedules",
        SCHEDULES,
        "Every recurring schedule, by name",
        CLIENT,
        {"200": response_doc("Each with its next five fire times.", "ScheduleList")},
    ),
)
async def list_all(request: web.Request) -> web.Response:
    """Every schedule, by name."""
    svc = request.app[SERVICE]
    return answer(200, {"schedules": svc.schedules.list()})


@routes.get(
    "/v1/schedules/{name}",
    by_name_operation(
        "get_schedule",
        "A recurring schedule, with its next five fire times",
        {"200": response_doc("The schedule.", "Schedule")},
    ),
)
async def get_one(request: web.Request) -> web.Response:
    """One schedule, with its next five fire times."""
    svc = request.app[SERVICE]
    name = parse_name(request.match_info["name"])
    return answer(200, svc.schedules.get(name))


def _action(act: Callable[[NodeService, str], Awaitable[dict]]):
    async def handle(request: web.Request) -> web.Response:
        svc = request.app[SERVICE]
        name = parse_name(request.match_info["name"])
        return answer(200, await act(svc, name))

    return handle


routes.delete(
    "/v1/schedules/{name}",
    by_name_operation(
        "delete_schedule",
        "Delete a schedule; its firings not yet delivered are cancelled",
        {"200": response_doc("Deleted.", "ScheduleDeleted")},
    ),
)(_action(lambda svc, name: svc.schedules.delete(name)))
routes.post(
    "/v1/schedules/{name}/pause",
    by_name_operation(
        "pause_schedule",
        "Pause a schedule: nothing more is planned, and its firings not yet delivered are cancelled",
        {"200": response_doc("Paused (now, or before).", "Schedule")},
    ),
)(_action(lambda svc, name: svc.schedules.pause(name)))
routes.post(
    "/v1/schedules/{name}/resume",
    by_name_operation(
        "resume_schedule",
        "Resume a schedule: planned again from now; what passed while paused is skipped",
        {"200": response_doc("Active (now, or before).", "Schedule")},
    ),
)(_action(lambda svc, name: svc.schedules.resume(name)))
