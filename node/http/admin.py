"""The admin routes: this node's status, a master's release (handover), backups and the
cluster's membership."""

from __future__ import annotations

from aiohttp import web
from msgspec import UNSET

from horologe.cluster.backup.stream import store_bytes

from .common import SERVICE, answer, json_body
from .errors import ApiError
from .rules.cluster import parse_new_member
from .rules.messages import parse_release

routes = web.RouteTableDef()


@routes.get("/admin/status")
async def admin_status(request: web.Request) -> web.Response:
    """This node's role, Raft indexes, wheel state and counters."""
    return answer(200, request.app[SERVICE].admin_status())


@routes.post("/admin/release-master")
async def release_master(request: web.Request) -> web.Response:
    """Make the master hand over, optionally to a named node."""
    svc = request.app[SERVICE]
    body = await json_body(request) if request.can_read_body else {}
    if not isinstance(body, dict) or set(body) - {"to"}:
        raise ApiError(400, "invalid_body", 'body must be {} or {"to": "<node_id>"}', "to")
    to = parse_release(body).to
    return answer(200, await svc.handover.release(None if to is UNSET else to))


@routes.get("/admin/cluster/members")
async def cluster_members(request: web.Request) -> web.Response:
    """The membership as this node's Raft log has it."""
    return answer(200, request.app[SERVICE].membership.listing())


@routes.post("/admin/cluster/members")
async def add_member(request: web.Request) -> web.Response:
    """Add a node (started to join): fed the log until caught up, then committed as a member."""
    new = parse_new_member(await json_body(request))
    svc = request.app[SERVICE]
    return answer(200, await svc.membership.add(new.node_id, new.raft, new.http, new.catch_up_s))


@routes.delete("/admin/cluster/members/{node_id}")
async def remove_member(request: web.Request) -> web.Response:
    """Remove a member (not the master: release it first)."""
    return answer(200, await request.app[SERVICE].membership.remove(request.match_info["node_id"]))


@routes.get("/admin/backup")
async def backup(request: web.Request) -> web.StreamResponse:
    """A consistent copy of this node's store, as a tar (cluster/backup/): any node sends one."""
    async with request.app[SERVICE].backups.open() as (point, chunks):
        response = web.StreamResponse(
            headers={
                "Content-Type": "application/octet-stream",  # a tar
                "Horologe-Backup-Index": str(point.entries[1][1]),
                "Horologe-Backup-Bytes": str(store_bytes(point)),
            }
        )
        await response.prepare(request)
        async for chunk in chunks:
            await response.write(chunk)
        await response.write_eof()
    return response
