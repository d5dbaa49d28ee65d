"""The consumer routes (DESIGN §6): pull with leases, ack, nack, release and extend; and a group's
dead-letter queue, peeked and requeued under ``/admin/dlq``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from aiohttp import web

from ..consumers import wire as pull_wire
from ..consumers.service import Pulled
from .common import SERVICE, answer, json_body
from .openapi.operations import (
    ADMIN,
    CLIENT,
    CONSUMERS,
    DEAD_LETTERS,
    GROUP,
    JSON,
    TOPIC,
    operation,
    path_param,
    query_param,
    response_doc,
)
from .openapi.schemas import ref
from .route_table import RouteTable
from .rules.messages import (
    MAX_POSITION,
    parse_consumer_request,
    parse_dlq_group,
    parse_dlq_peek,
    parse_names,
    parse_requeue,
)

routes = RouteTable()


async def _consumer_request(request: web.Request, action: str) -> tuple:
    """The service and the call's checked body."""
    svc = request.app[SERVICE]
    return svc, parse_consumer_request(request.match_info["topic"], await json_body(request), action)


@routes.post(
    "/v1/topics/{topic}/pull",
    operation(
        "pull_messages",
        CONSUMERS,
        "Lease up to `max` messages of the topic to this consumer of the group",
        CLIENT,
        {
            "200": {
                "description": "The messages leased (none once `wait_ms` passed without any). With "
                "`Accept: application/msgpack; layout=columns`, the same in msgpack by columns, each "
                "record flat; with `Accept: application/msgpack`, by messages, each as its stored "
                "record (docs/api.md, pull).",
                "content": {JSON: {"schema": ref("Pulled")}, "application/msgpack": {"schema": {}}},
            }
        },
        body="Pull",
        parameters=(TOPIC,),
        errors=("Unprocessable",),
    ),
)
async def pull(request: web.Request) -> web.Response:
    """Lease up to max messages to this consumer of the group; long-polls up to wait_ms."""
    svc, req = await _consumer_request(request, "pull")
    loop = asyncio.get_running_loop()
    until = loop.time() + req["wait_ms"] / 1000

    def polled() -> Awaitable[Pulled]:  # for what is left of wait_ms, each time it is held
        return svc.consumers.pull(
            req["group"],
            req["topic"],
            req.get("tags"),
            req["max"],
            max(0, round((until - loop.time()) * 1000)),
            req["visibility_ms"],
            req["ahead_ms"],
            req["pull_id"],
            gone=lambda: request.transport is None or request.transport.is_closing(),
        )

    pulled = await svc.hold.through(polled)
    accept = request.headers.get("Accept", "")
    if pull_wire.MSGPACK in accept:
        wire = pull_wire.as_columns if pull_wire.COLUMNS in accept else pull_wire.as_msgpack
        return web.Response(body=wire(pulled, svc.clock()), content_type=pull_wire.MSGPACK)
    return answer(200, pull_wire.as_json(pulled, svc.clock()))


@routes.post(
    "/v1/topics/{topic}/ack",
    operation(
        "ack_messages",
        CONSUMERS,
        "Acknowledge leased messages: never handed out again, even after a failover",
        CLIENT,
        {"200": response_doc("How many messages the receipts name, each once.", "Acked")},
        body="Receipts",
        parameters=(TOPIC,),
    ),
)
async def ack(request: web.Request) -> web.Response:
    """Acknowledge leased messages by receipt (a message's, or a pull's batch receipt);
    never handed out again, even after failover."""
    svc, req = await _consumer_request(request, "ack")
    return answer(200, {"acked": await svc.consumers.ack(req["group"], req["topic"], req["receipts"])})


@routes.post(
    "/v1/topics/{topic}/nack",
    operation(
        "nack_messages",
        CONSUMERS,
        "Give leased messages back: retried at the next retry level, or dead-lettered after the last",
        CLIENT,
        {"200": response_doc("What the entry did: copies made, and messages moved to the DLQ.", "Nacked")},
        body="Nack",
        parameters=(TOPIC,),
        errors=("NotFound",),
    ),
)
async def nack(request: web.Request) -> web.Response:
    """Give messages back: redelivered at the next retry level, or to %DLQ%<group> after the last."""
    svc, req = await _consumer_request(request, "nack")
    nacked = await svc.consumers.nack(
        req["group"], req["topic"], req["receipts"], dead_letter=req["dead_letter"]
    )
    return answer(200, nacked)


@routes.post(
    "/v1/topics/{topic}/release",
    operation(
        "release_leases",
        CONSUMERS,
        "Give leased messages back now, no attempt counted: handed out again at once",
        CLIENT,
        {"200": response_doc("How many messages these receipts still held a lease on.", "LeasesReleased")},
        body="Receipts",
        parameters=(TOPIC,),
    ),
)
async def release(request: web.Request) -> web.Response:
    """Give leased messages back now, no attempt counted (a worker's warm shutdown)."""
    svc, req = await _consumer_request(request, "release")
    return answer(200, {"released": await svc.consumers.release(req["group"], req["topic"], req["receipts"])})


@routes.post(
    "/v1/topics/{topic}/extend",
    operation(
        "extend_leases",
        CONSUMERS,
        "Renew leases these receipts still hold to visibility_ms from now; the receipts stay good",
        CLIENT,
        {"200": response_doc("How many leases were renewed, and until when.", "Extended")},
        body="Extend",
        parameters=(TOPIC,),
        errors=("Unprocessable",),
    ),
)
async def extend(request: web.Request) -> web.Response:
    """Renew the leases these receipts still hold, for a long task."""
    svc, req = await _consumer_request(request, "extend")
    extended, until = await svc.consumers.extend(
        req["group"], req["topic"], req["receipts"], req["visibility_ms"]
    )
    return answer(200, {"extended": extended, "lease_until": until})


@routes.get(
    "/v1/topics/{topic}/groups/{group}",
    operation(
        "get_backlog",
        CONSUMERS,
        "A group's backlog on the topic: unacked, of those leased, and waiting for a pull",
        CLIENT,
        {"200": response_doc("The group's counts, by the master's leases and clock.", "Backlog")},
        parameters=(path_param("topic", ref("Name"), "a topic"), GROUP),
        errors=("BadRequest",),
    ),
)
async def backlog(request: web.Request) -> web.Response:
    """A group's backlog on a topic: unacked, of those leased, and waiting for a pull."""
    svc = request.app[SERVICE]
    topic, group = parse_names(request.match_info["topic"], request.match_info["group"])
    return answer(200, await svc.consumers.backlog(group, topic))


@routes.post(
    "/v1/topics/{topic}/purge",
    operation(
        "purge_messages",
        CONSUMERS,
        "Ack every due message the group has not acked and no consumer holds (a task queue's purge)",
        CLIENT,
        {"200": response_doc("How many messages were acked.", "Purged")},
        body="Group",
        parameters=(TOPIC,),
        description="Leased messages stay with their consumers (their receipts still ack them), and "
        "messages not yet due stay scheduled; only this group's progress moves. There is no undo.",
    ),
)
async def purge(request: web.Request) -> web.Response:
    """Ack every due message the group has not acked and no consumer holds (a task queue's purge)."""
    svc, req = await _consumer_request(request, "purge")
    return answer(200, {"purged": await svc.consumers.purge(req["group"], req["topic"])})


@routes.get(
    "/admin/dlq/{group}",
    operation(
        "peek_dead_letters",
        DEAD_LETTERS,
        "A group's dead-letter entries not yet acked, oldest first, without leasing them",
        ADMIN,
        {"200": response_doc("Up to `limit` entries past `after`.", "DlqPeek")},
        parameters=(
            GROUP,
            query_param("after", {"type": "integer", "minimum": 0, "maximum": MAX_POSITION}, required=False),
            query_param("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, required=False),
        ),
        errors=("BadRequest", "Unprocessable"),
    ),
)
async def dlq_peek(request: web.Request) -> web.Response:
    """A group's dead-letter entries not yet acked, without leasing them."""
    svc = request.app[SERVICE]
    group = parse_dlq_group(request.match_info["group"])
    after, limit = parse_dlq_peek(request.query)
    return answer(200, svc.dead_letters.peek(group, after, limit))


@routes.post(
    "/admin/dlq/{group}/requeue",
    operation(
        "requeue_dead_letters",
        DEAD_LETTERS,
        "Produce dead-letter entries again to their topics, due now, then ack them in the DLQ",
        ADMIN,
        {"200": response_doc("What was moved, and what was not found or had expired.", "Requeued")},
        body="Requeue",
        parameters=(GROUP,),
    ),
)
async def dlq_requeue(request: web.Request) -> web.Response:
    """Produce dead-letter entries again to their topics, due now, then ack them in the DLQ."""
    svc = request.app[SERVICE]
    group = parse_dlq_group(request.match_info["group"])
    ids = parse_requeue(await json_body(request))
    return answer(200, await svc.dead_letters.requeue(group, ids))
