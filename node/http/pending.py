"""What is pending, without reading a body where it can: ``/v1/forecast`` (counts per time
bucket) and ``/v1/topics/{topic}/pending`` (a topic's messages in firing order)."""

from __future__ import annotations

from aiohttp import web

from .common import SERVICE, answer
from .pending_wire import pending_json
from .rules.queries import page_cursor, parse_forecast_query, parse_pending_query

routes = web.RouteTableDef()


@routes.get("/v1/forecast")
async def get_forecast(request: web.Request) -> web.Response:
    """Pending messages per time bucket (1m, 1h or 1d), from the hour indexes: no body is read."""
    svc = request.app[SERVICE]
    svc.require_master()
    q = parse_forecast_query(request.query, svc.clock())
    f = svc.view.forecast(q.start_ms, q.buckets, q.bucket_ms, q.topic)
    return answer(200, {"bucket": q.bucket, "topic": q.topic, "before": f.before, "buckets": f.as_wire()})


@routes.get("/v1/topics/{topic}/pending")
async def list_pending(request: web.Request) -> web.Response:
    """Pending messages of a topic in the order they will fire, a page at a time; or the
    one a producer key names (``key=``)."""
    svc = request.app[SERVICE]
    svc.require_master()
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

