"""The routes of ``/v1/messages`` (DESIGN §6): schedule, look up, cancel and reschedule
messages, by id or by producer key."""

from __future__ import annotations

import time

from aiohttp import web

from horologe.cluster import CANCELLED, SCHEDULED, UNKNOWN
from horologe.storage import MessageColumns, MessageExpiredError, MessageId, UnknownMessageError
from horologe.storage.message_id import ID_PATTERN

from ..consumers import wire as pull_wire
from ..service import NodeService
from .common import CONFIG, METRICS, SERVICE, answer, json_body, produce_body, read_body
from .errors import ApiError
from .openapi.operations import (
    CLIENT,
    KEY_QUERY,
    MESSAGE_ID,
    MESSAGES,
    MSGPACK_BODY,
    operation,
    reschedule_operation,
    response_doc,
)
from .route_table import RouteTable
from .rules.messages import batch_items, parse_message, parse_new_time, parse_reschedules
from .rules.plain_batch import plain_batch, plain_message
from .rules.queries import parse_key_query

routes = RouteTable()


def _mid(text: str) -> MessageId:
    try:
        return MessageId.parse(text)
    except UnknownMessageError as e:
        raise ApiError(404, "not_found", str(e), "id") from e


@routes.post(
    "/v1/messages",
    operation(
        "produce_message",
        MESSAGES,
        "Schedule one message",
        CLIENT,
        {
            "201": response_doc(
                "Stored on a majority, or its key named a message already there: "
                "the id and `deliver_at` are that message's.",
                "Scheduled",
            )
        },
        body="Message",
        errors=("Unprocessable",),
        description=MSGPACK_BODY,
    ),
)
async def post_message(request: web.Request) -> web.Response:
    """Schedule one message."""
    started = time.perf_counter()
    svc = request.app[SERVICE]
    now = svc.clock()
    msgpack = request.content_type == pull_wire.MSGPACK
    msg = plain_message(await read_body(request), msgpack, now, svc.limits)
    if msg is None:  # each rule, each refusal as documented (the body is read once)
        msg = parse_message(await produce_body(request), now, svc.limits)
    (mid,), (deliver_at,) = await svc.produce_answered(MessageColumns.from_messages([msg]))
    request.app[METRICS].produce_seconds.observe(time.perf_counter() - started)
    return answer(201, {"id": mid, "topic": msg.topic, "deliver_at": deliver_at})


@routes.post(
    "/v1/messages/batch",
    operation(
        "produce_messages",
        MESSAGES,
        "Schedule many messages; one result per item, in order",
        CLIENT,
        {"200": response_doc("Valid items stored; invalid ones answered by their error.", "BatchResults")},
        body="Batch",
        description=MSGPACK_BODY,
    ),
)
async def post_batch(request: web.Request) -> web.Response:
    """Schedule many messages; one result per item, in order."""
    started = time.perf_counter()
    svc = request.app[SERVICE]
    limit = request.app[CONFIG].max_batch_items
    now = svc.clock()
    msgpack = request.content_type == pull_wire.MSGPACK
    cols = plain_batch(await read_body(request), msgpack, now, svc.limits, limit)
    if cols is not None:  # what the SDK sends: every item plain and good
        ids, at = await svc.produce_answered(cols) if len(cols) else ([], [])
        results = [{"id": mid, "deliver_at": d} for mid, d in zip(ids, at, strict=True)]
    else:  # each item by every rule, each refusal as documented (the body is read once)
        items = batch_items(await produce_body(request), limit, "messages")
        results = await _produce_each(svc, items, now)
    request.app[METRICS].produce_seconds.observe(time.perf_counter() - started)
    return answer(200, {"results": results})


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
        ids, at = await svc.produce_answered(MessageColumns.from_messages([m for _, m in good]))
        for (i, _), mid, d in zip(good, ids, at, strict=True):
            results[i] = {"id": mid, "deliver_at": d}
    return results


@routes.get(
    f"/v1/messages/{{id:{ID_PATTERN}}}",
    operation(
        "get_message",
        MESSAGES,
        "A message's state: scheduled, delivered or cancelled",
        CLIENT,
        {"200": response_doc("The message's state.", "MessageStatus")},
        parameters=(MESSAGE_ID,),
        errors=("NotFound",),
    ),
)
async def get_message(request: web.Request) -> web.Response:
    """A message's state: scheduled, delivered or cancelled."""
    svc = request.app[SERVICE]
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
    return answer(200, out)


@routes.delete(
    f"/v1/messages/{{id:{ID_PATTERN}}}",
    operation(
        "cancel_message",
        MESSAGES,
        "Cancel a scheduled message",
        CLIENT,
        {"200": response_doc("Cancelled (now, or before).", "Cancelled")},
        parameters=(MESSAGE_ID,),
        errors=("NotFound", "Conflict"),
    ),
)
async def delete_message(request: web.Request) -> web.Response:
    """Cancel a scheduled message (409 once delivered)."""
    svc = request.app[SERVICE]
    ident = str(_mid(request.match_info["id"]))
    ((state, _),) = await svc.cancel([ident], [])
    return _cancel_answer(ident, state)


@routes.delete(
    "/v1/messages",
    operation(
        "cancel_message_by_key",
        MESSAGES,
        "Cancel a scheduled message by its producer key",
        CLIENT,
        {"200": response_doc("Cancelled (now, or before).", "Cancelled")},
        parameters=KEY_QUERY,
        errors=("BadRequest", "NotFound", "Conflict"),
    ),
)
async def delete_by_key(request: web.Request) -> web.Response:
    """Cancel by producer key: ?topic=&key=."""
    svc = request.app[SERVICE]
    topic, key = parse_key_query(request.query)
    ((state, mid),) = await svc.cancel([], [(topic, key)])
    return _cancel_answer(mid or f"{topic}/{key}", state)


def _cancel_answer(ident: str, state: str) -> web.Response:
    """200 once cancelled (now or before), 409 once delivered, 404 for what was never stored."""
    if state == CANCELLED:
        return answer(200, {"id": ident, "state": CANCELLED})
    raise _not_scheduled(ident, state)


def _not_scheduled(ident: str, state: str) -> ApiError:
    """Why a cancel or reschedule of ``ident`` found nothing to do: it fired, was cancelled
    (for a reschedule), or never was."""
    if state == CANCELLED:
        return ApiError(409, "cancelled", f"{ident} was cancelled", "id")
    if state != UNKNOWN:  # delivered, or dropped or dead-lettered once late
        return ApiError(409, "already_delivered", f"{ident} was already {state.replace('_', '-')}", "id")
    return ApiError(404, "not_found", f"no scheduled message {ident}", "id")


@routes.patch(
    f"/v1/messages/{{id:{ID_PATTERN}}}",
    reschedule_operation("reschedule_message", "Reschedule a message; its id stays", (MESSAGE_ID,)),
)
async def patch_message(request: web.Request) -> web.Response:
    """Reschedule a message: ``{deliver_at | deliver_after}``; its id stays."""
    svc = request.app[SERVICE]
    ident = str(_mid(request.match_info["id"]))
    at = parse_new_time(await json_body(request), svc.clock(), svc.limits)
    ((state, _),) = await svc.reschedule([ident], [], [at])
    return _moved(svc, ident, state, at)


@routes.patch(
    "/v1/messages",
    reschedule_operation("reschedule_message_by_key", "Reschedule a message by its producer key", KEY_QUERY),
)
async def patch_by_key(request: web.Request) -> web.Response:
    """Reschedule by producer key: ?topic=&key=."""
    svc = request.app[SERVICE]
    topic, key = parse_key_query(request.query)
    at = parse_new_time(await json_body(request), svc.clock(), svc.limits)
    ((state, mid),) = await svc.reschedule([], [(topic, key)], [at])
    return _moved(svc, mid or f"{topic}/{key}", state, at)


def _moved(svc: NodeService, ident: str, state: str, at: int) -> web.Response:
    if state != SCHEDULED:
        raise _not_scheduled(ident, state)
    topic = svc.view.status(MessageId.parse(ident)).topic
    return answer(200, {"id": ident, "topic": topic, "state": SCHEDULED, "deliver_at": at})


@routes.post(
    "/v1/messages/reschedule",
    operation(
        "reschedule_messages",
        MESSAGES,
        "Reschedule many messages, by id or key; one result per item, in order",
        CLIENT,
        {
            "200": response_doc(
                "Items that named a scheduled message moved; the others answered by their error.",
                "RescheduleResults",
            )
        },
        body="RescheduleBatch",
    ),
)
async def post_reschedule(request: web.Request) -> web.Response:
    """Reschedule many messages, by id or by key; one result per item, in order."""
    svc = request.app[SERVICE]
    items = parse_reschedules(
        await json_body(request), svc.clock(), svc.limits, request.app[CONFIG].max_batch_items
    )
    good = [(i, item) for i, item in enumerate(items) if not isinstance(item, ApiError)]
    results = [item.body() if isinstance(item, ApiError) else {} for item in items]
    # A message named twice moves once, to the last time the request gives it; the entry
    # takes its ids before its keys, so only each message's last item goes into it, and
    # the others answer as that one does.
    by_id = [(i, item) for i, item in good if item.id is not None]
    by_key = [(i, item) for i, item in good if item.id is None]
    last_of = {}  # item -> the item naming the same message last
    if len(good) > 1:
        named = await svc.targets([item.id for _, item in by_id], [item.key for _, item in by_key])
        target = {i: mid for (i, _), mid in zip(by_id + by_key, named, strict=True) if mid is not None}
        last = {target[i]: i for i, _ in good if i in target}
        last_of = {i: last[mid] for i, mid in target.items() if last[mid] != i}
    by_id = [(i, item) for i, item in by_id if i not in last_of]
    by_key = [(i, item) for i, item in by_key if i not in last_of]
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
    for i, j in last_of.items():
        results[i] = results[j]
    return answer(200, {"results": results})
