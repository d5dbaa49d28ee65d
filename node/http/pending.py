"""What is pending, without reading a body where it can: ``/v1/forecast`` (counts per time
bucket) and ``/v1/topics/{topic}/pending`` (a topic's messages in firing order)."""

from __future__ import annotations

from aiohttp import web

from horologe.storage.message_json import MAX_KEY

from .common import SERVICE, answer
from .openapi.operations import (
    CLIENT,
    INSTANT,
    PENDING,
    PENDING_TOPIC,
    operation,
    path_param,
    query_param,
    response_doc,
)
from .openapi.schemas import ref
from .pending_wire import pending_json
from .route_table import RouteTable
from .rules.queries import page_cursor, parse_forecast_query, parse_pending_query

routes = RouteTable()


@routes.get(
    "/v1/forecast",
    operation(
        "get_forecast",
        PENDING,
        "Pending messages per time bucket, from the hour indexes",
        CLIENT,
        {"200": response_doc("Counts per bucket, to the second of each message's slot.", "Forecast")},
        parameters=(
            query_param("topic", PENDING_TOPIC, required=False),
            query_param("bucket", ref("BucketSize"), required=False),
            query_param("from", INSTANT, required=False),
            query_param("to", INSTANT, required=False),
        ),
        errors=("BadRequest", "Unprocessable"),
        description="400 `invalid_range` when `to` is not after `from`; 422 `out_of_range` past 10,000 "
        "buckets. `from` and `to` as ISO-8601 are read by Python's `datetime.fromisoformat`: a leap "
        "second or more than six decimals is refused (400 `invalid_field`).",
    ),
)
async def get_forecast(request: web.Request) -> web.Response:
    """Pending messages per time bucket (1m, 1h or 1d), from the hour indexes: no body is read."""
    svc = request.app[SERVICE]
    q = parse_forecast_query(request.query, svc.clock())
    f = svc.view.forecast(q.start_ms, q.buckets, q.bucket_ms, q.topic)
    return answer(200, {"bucket": q.bucket, "topic": q.topic, "before": f.before, "buckets": f.as_wire()})


@routes.get(
    "/v1/topics/{topic}/pending",
    operation(
        "list_pending_messages",
        PENDING,
        "A topic's pending messages in the order they will fire, a page at a time",
        CLIENT,
        {"200": response_doc("A page; `next_cursor` goes on from its end.", "PendingList")},
        parameters=(
            path_param("topic", PENDING_TOPIC),
            query_param("from", INSTANT, required=False),
            query_param("to", INSTANT, required=False),
            query_param("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, required=False),
            query_param("cursor", {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}, required=False),
            query_param("with_body", {"enum": ["true", "false"]}, required=False),
            query_param("key", {"type": "string", "minLength": 1, "maxLength": MAX_KEY}, required=False),
        ),
        errors=("BadRequest", "Unprocessable"),
        description="400 `invalid_range` when `to` is not after `from`; 400 `invalid_field` on `cursor` "
        "for a cursor this API did not give out. `key` looks up the one message of that producer key "
        "instead: `messages` holds it while it is scheduled (under its original id, at its new time once "
        "rescheduled), else nothing, and `next_cursor` is null; `key` with `cursor`, `from` or `to` is "
        "400 `conflicting_fields`.",
    ),
)
async def list_pending(request: web.Request) -> web.Response:
    """Pending messages of a topic in the order they will fire, a page at a time; or the
    one a producer key names (``key=``)."""
    svc = request.app[SERVICE]
    topic = request.match_info["topic"]
    q = parse_pending_query(topic, request.query)
    if q.key is not None:  # one message, by its producer key: 0 or 1 in the page
        page = svc.view.pending_by_key(topic, await svc.lookup_key(topic, q.key))
    else:
        page = svc.view.list_pending(topic, q.start_ms, q.stop_ms, q.limit, q.after)
    stored = svc.view.read_messages(page.ids)
    messages = [pending_json(s, slot, q.with_body) for s, slot in zip(stored, page.slots_ms, strict=True)]
    cursor = None if page.next_after is None else page_cursor(page.next_after)
    return answer(200, {"messages": messages, "next_cursor": cursor})
