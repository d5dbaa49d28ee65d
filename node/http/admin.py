"""The admin routes: this node's status, a master's release (handover), backups and the
cluster's membership."""

from __future__ import annotations

from aiohttp import web
from msgspec import UNSET

from horologe.cluster.backup.stream import store_bytes

from .common import SERVICE, answer, json_body
from .errors import ApiError
from .openapi.operations import ADMIN, ADMIN_TAG, operation, path_param, query_param, response_doc
from .route_table import RouteTable
from .rules.cluster import parse_new_member
from .rules.messages import parse_release
from .rules.queries import parse_backup_query

routes = RouteTable()


@routes.get(
    "/admin/status",
    operation(
        "get_status",
        ADMIN_TAG,
        "This node's role, Raft indexes, wheel state and counters",
        ADMIN,
        {"200": response_doc("This node's view.", "Status")},
        master=False,
    ),
)
async def admin_status(request: web.Request) -> web.Response:
    """This node's role, Raft indexes, wheel state and counters."""
    return answer(200, request.app[SERVICE].admin_status())


@routes.post(
    "/admin/release-master",
    operation(
        "release_master",
        ADMIN_TAG,
        "Make the master hand over, optionally to a named node",
        ADMIN,
        {"200": response_doc("Handed over; the linked nodes follow the new master.", "Released")},
        body="Release",
        body_required=False,
        errors=("Conflict", "Unprocessable"),
        description="409 `no_linked_target` (no peer linked to every node) or `release_in_progress`; "
        "422 `unknown_node`; 503 `transfer_failed` or `transfer_unconfirmed`.",
    ),
)
async def release_master(request: web.Request) -> web.Response:
    """Make the master hand over, optionally to a named node."""
    svc = request.app[SERVICE]
    body = await json_body(request) if request.can_read_body else {}
    if not isinstance(body, dict) or set(body) - {"to"}:
        raise ApiError(400, "invalid_body", 'body must be {} or {"to": "<node_id>"}', "to")
    to = parse_release(body).to
    return answer(200, await svc.handover.release(None if to is UNSET else to))


@routes.get(
    "/admin/cluster/members",
    operation(
        "list_members",
        ADMIN_TAG,
        "The cluster's members as this node's Raft log has them",
        ADMIN,
        {"200": response_doc("This node first, then the others by id.", "Members")},
        master=False,
    ),
)
async def cluster_members(request: web.Request) -> web.Response:
    """The membership as this node's Raft log has it."""
    return answer(200, request.app[SERVICE].membership.listing())


@routes.post(
    "/admin/cluster/members",
    operation(
        "add_member",
        ADMIN_TAG,
        "Add a node started to join: fed the log until caught up, then committed as a member",
        ADMIN,
        {"200": response_doc("It is a member: the membership now.", "Members")},
        body="NewMember",
        errors=("Conflict", "Unprocessable", "NotCompleted"),
        description="422 `out_of_range` (`catch_up_s` outside its bounds); "
        "409 `member_exists` (its id or an address is a member's), `not_reachable` (nothing "
        "answers at its `http` address: start it first), `wrong_node` (the node there has another "
        "`node_id`), `wrong_raft` (its config names another `raft` address), `not_joining` (it was not "
        "started with `join = true`), `master_not_a_peer` (its peers leave out the master, which then "
        "could not feed it), `change_under_way` or "
        "`change_refused` (another change is not committed yet: retry); 504 `catch_up_failed` (it did not "
        "catch up within `catch_up_s`: is it running with `join = true`, reachable at its Raft address?) "
        "or `lost_lead` (nothing changed), `not_committed` (it may still be made: list the members).",
    ),
)
async def add_member(request: web.Request) -> web.Response:
    """Add a node (started to join): fed the log until caught up, then committed as a member."""
    new = parse_new_member(await json_body(request))
    svc = request.app[SERVICE]
    return answer(200, await svc.membership.add(new.node_id, new.raft, new.http, new.catch_up_s))


@routes.delete(
    "/admin/cluster/members/{node_id}",
    operation(
        "remove_member",
        ADMIN_TAG,
        "Remove a member; the master itself is released first (409 `is_master`)",
        ADMIN,
        {"200": response_doc("It is no longer a member: the membership now.", "Members")},
        errors=("Conflict", "Unprocessable", "NotCompleted"),
        parameters=(path_param("node_id", {"type": "string"}, "the member's node id"),),
        description="409 `is_master` (release the master first), `would_lose_quorum` (the members left "
        "that the master hears, and ships no snapshot to, make no majority of them), `change_under_way` "
        "or `change_refused`; "
        "422 `unknown_node`; 504 `lost_lead` (nothing changed) or `not_committed` (it may still be made: "
        "list the members).",
    ),
)
async def remove_member(request: web.Request) -> web.Response:
    """Remove a member (not the master: release it first)."""
    return answer(200, await request.app[SERVICE].membership.remove(request.match_info["node_id"]))


@routes.get(
    "/admin/backup",
    operation(
        "get_backup",
        ADMIN_TAG,
        "A consistent copy of this node's store, as a tar (`horologe backup`)",
        ADMIN,
        {
            "200": {
                "description": "A tar (sent as `application/octet-stream`): `store/commits.log`, every "
                "store file up to its committed length, then `backup.json` with the Raft index and "
                "term and every file's SHA-256 "
                "(docs/deploy.md, Backup and restore). Header `Horologe-Backup-Index` names the "
                "Raft index, `Horologe-Backup-Bytes` what the files weigh.",
                "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            }
        },
        master=False,
        errors=("BadRequest", "Conflict", "Halted"),
        parameters=(query_param("allow_stale", {"type": "string", "enum": ["true", "false"]}, False),),
        description="Any node sends one, a follower as well as the master, and goes on serving. "
        "409 `backup_in_progress` (one at a time per node) or `nothing_to_back_up` (fewer than "
        "two Raft entries applied); 409 `not_current` when the node's copy may be behind the "
        "cluster's (not a voting member, no master known, no majority of its peers heard) and "
        "`allow_stale` is not `true`; 507 `halted`.",
    ),
)
async def backup(request: web.Request) -> web.StreamResponse:
    """A consistent copy of this node's store, as a tar (cluster/backup/): any node sends one."""
    allow_stale = parse_backup_query(request.query)
    async with request.app[SERVICE].backups.open(allow_stale) as (point, chunks):
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
