"""The aiohttp app factory: routes of DESIGN §6 over a NodeService."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
from collections.abc import AsyncIterator

import aiohttp
import msgpack
import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from horologe.cluster import (
    CANCELLED,
    SCHEDULED,
    UNKNOWN,
    ClusterError,
    NotMasterError,
    ProposalTimeoutError,
)
from horologe.storage import (
    MessageColumns,
    MessageExpiredError,
    MessageId,
    StorageFullError,
    UnknownMessageError,
)
from horologe.storage.message_id import ID_PATTERN
from horologe.storage.message_json import plain_columns

from .. import pull_wire
from ..clock import Clock, system_clock
from ..config import NodeConfig
from ..errors import ApiError
from ..ops.loop_lag import LoopLag
from ..ops.metrics import DUE_WITHIN_MS, NodeMetrics, Sources
from ..pending_wire import pending_json
from ..service import NodeService
from ..tls import client_context
from . import dashboard, schedules, subscriptions
from .access_log import request_ids
from .forwarding import Forwarder, cluster_target, forward_middleware
from .openapi.spec import DOCUMENT_JSON
from .rules.messages import (
    parse_consumer_request,
    parse_dlq_group,
    parse_dlq_peek,
    parse_message,
    parse_new_time,
    parse_requeue,
    parse_reschedules,
)
from .rules.queries import page_cursor, parse_forecast_query, parse_pending_query

SERVICE = web.AppKey("service", NodeService)
CONFIG = web.AppKey("config", NodeConfig)
METRICS = web.AppKey("metrics", NodeMetrics)
LOOP_LAG = web.AppKey("loop_lag", LoopLag)
FORWARDER = web.AppKey("forwarder", Forwarder)
PUBLIC = {"/healthz", "/readyz", "/metrics", "/openapi.json", dashboard.PREFIX}


def is_public(path: str) -> bool:
    """Served without a token: health, metrics, this API's document, the dashboard's files."""
    return path in PUBLIC or path.startswith(f"{dashboard.PREFIX}/")


def _json(status: int, body: dict) -> web.Response:
    try:
        raw = orjson.dumps(body)
    except TypeError:  # what orjson refuses and json writes (an int past 64 bits)
        raw = json.dumps(body).encode()
    return web.Response(body=raw, status=status, content_type="application/json")


@web.middleware
async def errors_and_auth(request: web.Request, handler):
    cfg = request.app[CONFIG]
    try:
        if not is_public(request.path):
            want = cfg.admin_token if request.path.startswith("/admin/") else cfg.client_token
            if want:  # unset only under --insecure-dev
                auth = request.headers.get("Authorization", "")
                if not auth.startswith("Bearer "):
                    raise ApiError(401, "unauthorized", "missing Authorization: Bearer <token>")
                if not hmac.compare_digest(auth[7:].encode(), want.encode()):
                    raise ApiError(403, "forbidden", "wrong token for this API")
        return await handler(request)
    except ApiError as e:
        return _json(e.status, e.body())
    except NotMasterError as e:
        if e.leader is None:
            return _json(503, {"error": {"code": "no_master", "message": str(e)}, "leader": None})
        # e.leader is the master's URL, scheme included: a node behind TLS sends to https://
        raise web.HTTPTemporaryRedirect(f"{e.leader}{request.rel_url}") from e
    except ProposalTimeoutError as e:
        return _json(503, {"error": {"code": "timeout", "message": str(e)}, "leader": None})
    except StorageFullError as e:
        return _json(507, {"error": {"code": "disk_full", "message": str(e)}})
    except ClusterError as e:
        return _json(503, {"error": {"code": "unavailable", "message": str(e)}, "leader": None})
    except web.HTTPRequestEntityTooLarge:
        return _json(413, {"error": {"code": "too_large", "message": "request body too large"}})
    except web.HTTPError as e:  # the router's 404 and 405: the JSON error shape too, Allow kept
        code = "_".join(e.reason.lower().split())
        answer = _json(
            e.status, {"error": {"code": code, "message": f"{e.reason}: {request.method} {request.path}"}}
        )
        if "Allow" in e.headers:
            answer.headers["Allow"] = e.headers["Allow"]
        return answer


async def _read(request: web.Request) -> bytes:
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge as e:
        limit = request.app[CONFIG].max_request_bytes
        raise ApiError(413, "too_large", f"request body over {limit} bytes (max_request_bytes)") from e


async def _json_body(request: web.Request):
    raw = await _read(request)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:  # also NaN, 1e400, lone surrogates, bad UTF-8
        raise ApiError(400, "invalid_json", f"body is not JSON: {e}") from e


async def _produce_body(request: web.Request):
    """A produce request's body: JSON, or msgpack when it says so, where a message's
    ``body`` may be raw bytes (no base64 on either side). parse_message checks both alike:
    each field's type, so a msgpack float NaN, an ext type or a bytes key is refused as
    in JSON."""
    if request.content_type != pull_wire.MSGPACK:
        return await _json_body(request)
    raw = await _read(request)
    try:
        return msgpack.unpackb(raw, raw=False)  # map keys: str or bytes only (strict_map_key)
    except (ValueError, TypeError, msgpack.UnpackException) as e:  # also bad UTF-8, extra data
        raise ApiError(400, "invalid_msgpack", f"body is not msgpack: {e}") from e


def _mid(text: str) -> MessageId:
    try:
        return MessageId.parse(text)
    except UnknownMessageError as e:
        raise ApiError(404, "not_found", str(e), "id") from e


async def post_message(request: web.Request) -> web.Response:
    """Schedule one message."""
    started = time.perf_counter()
    svc = request.app[SERVICE]
    svc.require_master()
    msg = parse_message(await _produce_body(request), svc.clock(), svc.limits)
    (mid,) = await svc.produce(MessageColumns.from_messages([msg]))
    request.app[METRICS].produce_seconds.observe(time.perf_counter() - started)
    return _json(201, {"id": mid, "topic": msg.topic, "deliver_at": msg.deliver_at_ms})


async def post_batch(request: web.Request) -> web.Response:
    """Schedule many messages; one result per item, in order."""
    started = time.perf_counter()
    svc = request.app[SERVICE]
    svc.require_master()
    body = await _produce_body(request)
    if not isinstance(body, dict) or set(body) != {"messages"} or not isinstance(body["messages"], list):
        raise ApiError(400, "invalid_body", 'body must be {"messages": [...]}', "messages")
    limit = request.app[CONFIG].max_batch_items
    if len(body["messages"]) > limit:
        raise ApiError(
            413, "too_large", f"{len(body['messages'])} messages in one batch; at most {limit}", "messages"
        )
    now = svc.clock()
    cols = plain_columns(body["messages"], now, svc.limits)
    if cols is not None:  # what the SDK sends: every item plain and good
        ids = await svc.produce(cols) if len(cols) else []
        at = cols.deliver_at_ms.tolist()
        results = [{"id": mid, "deliver_at": d} for mid, d in zip(ids, at, strict=True)]
    else:
        results = await _produce_each(svc, body["messages"], now)
    request.app[METRICS].produce_seconds.observe(time.perf_counter() - started)
    return _json(200, {"results": results})


async def _produce_each(svc, items: list, now: int) -> list[dict]:
    """Parse each item by every rule, produce the good ones; one result per item: its id
    and time, or why it was refused."""
    results: list[dict] = []
    good = []
    for i, item in enumerate(items):
        try:
            good.append((i, parse_message(item, now, svc.limits)))
            results.append({})
        except ApiError as e:
            results.append(e.body())
    if good:
        ids = await svc.produce(MessageColumns.from_messages([m for _, m in good]))
        for (i, m), mid in zip(good, ids, strict=True):
            results[i] = {"id": mid, "deliver_at": m.deliver_at_ms}
    return results


async def get_message(request: web.Request) -> web.Response:
    """A message's state: scheduled, delivered or cancelled."""
    svc = request.app[SERVICE]
    svc.require_master()
    try:
        st = svc.view.status(_mid(request.match_info["id"]))
    except MessageExpiredError as e:
        raise ApiError(404, "expired", str(e), "id") from e
    except UnknownMessageError as e:
        raise ApiError(404, "not_found", str(e), "id") from e
    out = {"id": str(st.id), "topic": st.topic, "state": st.state, "deliver_at": st.deliver_at_ms}
    if st.delivered_at_ms is not None:
        out["delivered_at"] = st.delivered_at_ms
    if st.late_by_ms is not None:
        out["late_by_ms"] = st.late_by_ms
    return _json(200, out)


def _cancel_answer(ident: str, state: str) -> web.Response:
    """200 once cancelled (now or before), 409 once delivered, 404 for what was never stored."""
    if state == CANCELLED:
        return _json(200, {"id": ident, "state": CANCELLED})
    raise _not_scheduled(ident, state)


def _not_scheduled(ident: str, state: str) -> ApiError:
    """Why a cancel or reschedule of ``ident`` found nothing to do: it fired, was cancelled
    (for a reschedule), or never was."""
    if state == CANCELLED:
        return ApiError(409, "cancelled", f"{ident} was cancelled", "id")
    if state != UNKNOWN:  # delivered, or dropped or dead-lettered once late
        return ApiError(409, "already_delivered", f"{ident} was already {state.replace('_', '-')}", "id")
    return ApiError(404, "not_found", f"no scheduled message {ident}", "id")


async def delete_message(request: web.Request) -> web.Response:
    """Cancel a scheduled message (409 once delivered)."""
    svc = request.app[SERVICE]
    svc.require_master()
    ident = str(_mid(request.match_info["id"]))
    ((state, _),) = await svc.cancel([ident], [])
    return _cancel_answer(ident, state)


async def patch_message(request: web.Request) -> web.Response:
    """Reschedule a message: ``{deliver_at | deliver_after}``; its id stays."""
    svc = request.app[SERVICE]
    svc.require_master()
    ident = str(_mid(request.match_info["id"]))
    at = parse_new_time(await _json_body(request), svc.clock(), svc.limits)
    ((state, _),) = await svc.reschedule([ident], [], [at])
    return _moved(svc, ident, state, at)


async def patch_by_key(request: web.Request) -> web.Response:
    """Reschedule by producer key: ?topic=&key=."""
    svc = request.app[SERVICE]
    svc.require_master()
    topic, key = _key_query(request)
    at = parse_new_time(await _json_body(request), svc.clock(), svc.limits)
    ((state, mid),) = await svc.reschedule([], [(topic, key)], [at])
    return _moved(svc, mid or f"{topic}/{key}", state, at)


def _moved(svc: NodeService, ident: str, state: str, at: int) -> web.Response:
    if state != SCHEDULED:
        raise _not_scheduled(ident, state)
    topic = svc.view.status(MessageId.parse(ident)).topic
    return _json(200, {"id": ident, "topic": topic, "state": SCHEDULED, "deliver_at": at})


async def post_reschedule(request: web.Request) -> web.Response:
    """Reschedule many messages, by id or by key; one result per item, in order."""
    svc = request.app[SERVICE]
    svc.require_master()
    items = parse_reschedules(
        await _json_body(request), svc.clock(), svc.limits, request.app[CONFIG].max_batch_items
    )
    good = [(i, item) for i, item in enumerate(items) if not isinstance(item, ApiError)]
    results = [item.body() if isinstance(item, ApiError) else {} for item in items]
    by_id = [(i, item) for i, item in good if item.id is not None]
    by_key = [(i, item) for i, item in good if item.id is None]
    asked = by_id + by_key  # the order the entry answers in
    if asked:
        answers = await svc.reschedule(
            [item.id for _, item in by_id], [item.key for _, item in by_key], [item.at for _, item in asked]
        )
        for (i, item), (state, mid) in zip(asked, answers, strict=True):
            ident = mid or item.id or "/".join(item.key)
            ok = state == SCHEDULED
            results[i] = (
                {"id": ident, "state": state, "deliver_at": item.at}
                if ok
                else _not_scheduled(ident, state).body()
            )
    return _json(200, {"results": results})


def _key_query(request: web.Request) -> tuple[str, str]:
    topic, key = request.query.get("topic"), request.query.get("key")
    if not topic or not key:
        raise ApiError(400, "invalid_query", "give topic= and key=", "topic" if not topic else "key")
    return topic, key


async def delete_by_key(request: web.Request) -> web.Response:
    """Cancel by producer key: ?topic=&key=."""
    svc = request.app[SERVICE]
    svc.require_master()
    topic, key = _key_query(request)
    ((state, mid),) = await svc.cancel([], [(topic, key)])
    return _cancel_answer(mid or f"{topic}/{key}", state)


async def get_forecast(request: web.Request) -> web.Response:
    """Pending messages per time bucket (1m, 1h or 1d), from the hour indexes: no body is read."""
    svc = request.app[SERVICE]
    svc.require_master()
    q = parse_forecast_query(request.query, svc.clock())
    f = svc.view.forecast(q.start_ms, q.buckets, q.bucket_ms, q.topic)
    return _json(200, {"bucket": q.bucket, "topic": q.topic, "before": f.before, "buckets": f.as_wire()})


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
    return _json(200, {"messages": messages, "next_cursor": cursor})


async def pull(request: web.Request) -> web.Response:
    """Lease up to max messages to this consumer of the group; long-polls up to wait_ms."""
    svc = request.app[SERVICE]
    svc.require_master()
    req = parse_consumer_request(request.match_info["topic"], await _json_body(request), "pull")
    pulled = await svc.consumers.pull(
        req["group"],
        req["topic"],
        req.get("tags"),
        req["max"],
        req["wait_ms"],
        req["visibility_ms"],
        req["ahead_ms"],
    )
    accept = request.headers.get("Accept", "")
    if pull_wire.MSGPACK in accept:
        wire = pull_wire.as_columns if pull_wire.COLUMNS in accept else pull_wire.as_msgpack
        return web.Response(body=wire(pulled, svc.clock()), content_type=pull_wire.MSGPACK)
    return _json(200, pull_wire.as_json(pulled, svc.clock()))


async def ack(request: web.Request) -> web.Response:
    """Acknowledge leased messages by receipt (a message's, or a pull's batch receipt);
    never handed out again, even after failover."""
    svc = request.app[SERVICE]
    svc.require_master()
    req = parse_consumer_request(request.match_info["topic"], await _json_body(request), "ack")
    return _json(200, {"acked": await svc.consumers.ack(req["group"], req["receipts"])})


async def nack(request: web.Request) -> web.Response:
    """Give messages back: redelivered at the next retry level, or to %DLQ%<group> after the last."""
    svc = request.app[SERVICE]
    svc.require_master()
    req = parse_consumer_request(request.match_info["topic"], await _json_body(request), "nack")
    return _json(200, await svc.consumers.nack(req["group"], req["receipts"]))


async def admin_status(request: web.Request) -> web.Response:
    """This node's role, Raft indexes, wheel state and counters."""
    return _json(200, request.app[SERVICE].admin_status())


async def release_master(request: web.Request) -> web.Response:
    """Make the master hand over, optionally to a named node."""
    svc = request.app[SERVICE]
    body = await _json_body(request) if request.can_read_body else {}
    if not isinstance(body, dict) or set(body) - {"to"}:
        raise ApiError(400, "invalid_body", 'body must be {} or {"to": "<node_id>"}', "to")
    if not isinstance(body.get("to", ""), str):
        raise ApiError(400, "invalid_field", "to must be a node id (a string)", "to")
    return _json(200, await svc.release_master(body.get("to")))


async def dlq_peek(request: web.Request) -> web.Response:
    """A group's dead-letter entries not yet acked, without leasing them."""
    svc = request.app[SERVICE]
    group = parse_dlq_group(request.match_info["group"])
    after, limit = parse_dlq_peek(request.query)
    svc.require_master()
    return _json(200, svc.dead_letters.peek(group, after, limit))


async def dlq_requeue(request: web.Request) -> web.Response:
    """Produce dead-letter entries again to their topics, due now, then ack them in the DLQ."""
    svc = request.app[SERVICE]
    group = parse_dlq_group(request.match_info["group"])
    ids = parse_requeue(await _json_body(request))
    svc.require_master()
    return _json(200, await svc.dead_letters.requeue(group, ids))


async def healthz(request: web.Request) -> web.Response:
    """The process is up."""
    return _json(200, {"ok": True})


async def readyz(request: web.Request) -> web.Response:
    """Ready: a master is known, this node applies, is linked to a quorum and knows its clocks."""
    body = request.app[SERVICE].readiness()
    return _json(200 if body["ready"] else 503, body)


async def metrics(request: web.Request) -> web.Response:
    """Prometheus metrics of this node (docs/api.md lists them)."""
    body = request.app[METRICS].exposition()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def openapi(request: web.Request) -> web.Response:
    """This API's OpenAPI 3.1 document (node/http/openapi/spec.py)."""
    return web.Response(body=DOCUMENT_JSON, content_type="application/json")


def create_app(config: NodeConfig, *, clock: Clock | None = None) -> web.Application:
    app = web.Application(
        middlewares=[
            request_ids(config.access_log),
            errors_and_auth,
            forward_middleware(lambda: app.get(FORWARDER)),
        ],
        client_max_size=config.max_request_bytes,
    )
    app[CONFIG] = config
    m = app[METRICS] = NodeMetrics(config.metrics_topic_cap)

    async def service_ctx(app: web.Application) -> AsyncIterator[None]:
        svc = NodeService(
            config,
            clock or system_clock(config.clock_offset_ms),
            m.observers(),
        )
        await svc.start()
        app[SERVICE] = svc
        m.read_from(
            Sources(
                svc.admin_status,
                svc.leader_changes,
                svc.stale_answers,
                svc.view.pending_by_topic,
                svc.view.unacked_by_group,
                svc.view.dlq_by_group,
                lambda: svc.view.pending_due(svc.clock(), tuple(DUE_WITHIN_MS.values())),
                (lambda: app[LOOP_LAG].figures()) if config.loop_lag_probe_ms else None,
            )
        )
        yield
        m.read_from(None)
        await svc.stop()

    async def loop_lag_ctx(app: web.Application) -> AsyncIterator[None]:
        probe = app[LOOP_LAG] = LoopLag(config.loop_lag_probe_ms)
        task = asyncio.create_task(probe.run())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def forwarder_ctx(app: web.Application) -> AsyncIterator[None]:
        svc = app[SERVICE]
        connector = aiohttp.TCPConnector(ssl=client_context(config.tls_ca))
        async with aiohttp.ClientSession(connector=connector) as session:
            peers = {p.node_id: config.http_url(p.http) for p in config.peers}
            target = cluster_target(config.node_id, peers, svc.raft.is_master, svc.leader_http)
            app[FORWARDER] = Forwarder(target, session)
            yield

    app.cleanup_ctx.append(service_ctx)
    app.cleanup_ctx.append(forwarder_ctx)
    if config.loop_lag_probe_ms:
        app.cleanup_ctx.append(loop_lag_ctx)
    app.router.add_post("/v1/messages", post_message)
    app.router.add_post("/v1/messages/batch", post_batch)
    # An id is 16 hex digits; so /v1/messages/batch is the batch's resource alone (GET there is 405).
    app.router.add_get(f"/v1/messages/{{id:{ID_PATTERN}}}", get_message)
    app.router.add_delete(f"/v1/messages/{{id:{ID_PATTERN}}}", delete_message)
    app.router.add_delete("/v1/messages", delete_by_key)
    app.router.add_patch(f"/v1/messages/{{id:{ID_PATTERN}}}", patch_message)
    app.router.add_patch("/v1/messages", patch_by_key)
    app.router.add_post("/v1/messages/reschedule", post_reschedule)
    app.router.add_get("/v1/forecast", get_forecast)
    app.router.add_get("/v1/topics/{topic}/pending", list_pending)
    app.router.add_post("/v1/topics/{topic}/pull", pull)
    app.router.add_post("/v1/topics/{topic}/ack", ack)
    app.router.add_post("/v1/topics/{topic}/nack", nack)
    app.router.add_get("/admin/status", admin_status)
    app.router.add_post("/admin/release-master", release_master)
    app.router.add_get("/admin/dlq/{group}", dlq_peek)
    app.router.add_post("/admin/dlq/{group}/requeue", dlq_requeue)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/openapi.json", openapi)
    dashboard.add_routes(app)
    schedules.add_routes(app, SERVICE, _json, _json_body)
    subscriptions.add_routes(app, SERVICE, _json, _json_body)
    return app
