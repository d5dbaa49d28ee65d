"""What every route module of the edge shares: the app's keys, a JSON answer, and the
request body read as JSON or msgpack, refused in the API's error shape when it is not."""

from __future__ import annotations

import json

import msgpack
import orjson
from aiohttp import web

from ..config import NodeConfig
from ..consumers import wire as pull_wire
from ..ops.loop_lag import LoopLag
from ..ops.metrics import NodeMetrics
from ..service import NodeService
from ..store_damage import StoreDamage
from .errors import ApiError
from .forwarding import Forwarder

Application = web.Application  # what the composition root (node/main.py) hooks its start and stop on
SERVICE = web.AppKey("service", NodeService)
CONFIG = web.AppKey("config", NodeConfig)
METRICS = web.AppKey("metrics", NodeMetrics)
LOOP_LAG = web.AppKey("loop_lag", LoopLag)
FORWARDER = web.AppKey("forwarder", Forwarder)
OPENAPI_JSON = web.AppKey("openapi_json", bytes)  # the document, built from the app's route tables
DAMAGE = web.AppKey("damage", StoreDamage)  # what a read that met damaged files does
SCOPES = web.AppKey("scopes", dict)  # each route -> its operation's token scope (route_table.scopes)


def answer(status: int, body: dict) -> web.Response:
    try:
        raw = orjson.dumps(body)
    except TypeError:  # what orjson refuses and json writes (an int past 64 bits)
        raw = json.dumps(body).encode()
    return web.Response(body=raw, status=status, content_type="application/json")


async def read_body(request: web.Request) -> bytes:
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge as e:
        limit = request.app[CONFIG].max_request_bytes
        raise ApiError(413, "too_large", f"request body over {limit} bytes (max_request_bytes)") from e


async def json_body(request: web.Request):
    raw = await read_body(request)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:  # also NaN, 1e400, lone surrogates, bad UTF-8
        raise ApiError(400, "invalid_json", f"body is not JSON: {e}") from e


async def produce_body(request: web.Request):
    """A produce request's body: JSON, or msgpack when it says so, where a message's
    ``body`` may be raw bytes (no base64 on either side). parse_message checks both alike:
    each field's type, so a msgpack float NaN, an ext type or a bytes key is refused as
    in JSON."""
    if request.content_type != pull_wire.MSGPACK:
        return await json_body(request)
    raw = await read_body(request)
    try:
        return msgpack.unpackb(raw, raw=False)  # map keys: str or bytes only (strict_map_key)
    except (ValueError, TypeError, msgpack.UnpackException) as e:  # also bad UTF-8, extra data
        raise ApiError(400, "invalid_msgpack", f"body is not msgpack: {e}") from e
