"""What probes and scrapers read, without a token: liveness, readiness, metrics and this
API's OpenAPI document."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from .common import METRICS, OPENAPI_JSON, SERVICE, answer
from .openapi.operations import JSON, OPS, PUBLIC, operation, response_doc
from .route_table import RouteTable

routes = RouteTable()


@routes.get(
    "/healthz",
    operation(
        "get_health",
        OPS,
        "The process is up",
        PUBLIC,
        {"200": response_doc("Up.", "Health")},
        master=False,
    ),
)
async def healthz(request: web.Request) -> web.Response:
    """The process is up."""
    return answer(200, {"ok": True})


@routes.get(
    "/readyz",
    operation(
        "get_readiness",
        OPS,
        "Ready: a master is known, this node applies, is linked to a quorum and knows its clocks",
        PUBLIC,
        {
            "200": response_doc("Ready.", "Readiness"),
            "503": response_doc("Not ready; the fields say why.", "Readiness"),
        },
        master=False,
    ),
)
async def readyz(request: web.Request) -> web.Response:
    """Ready: a master is known, this node applies, is linked to a quorum and knows its clocks."""
    body = request.app[SERVICE].readiness()
    return answer(200 if body["ready"] else 503, body)


@routes.get(
    "/metrics",
    operation(
        "get_metrics",
        OPS,
        "This node's Prometheus metrics",
        PUBLIC,
        {
            "200": {
                "description": "Prometheus text format 0.0.4.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        },
        master=False,
    ),
)
async def metrics(request: web.Request) -> web.Response:
    """Prometheus metrics of this node (docs/api.md lists them)."""
    body = request.app[METRICS].exposition()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


@routes.get(
    "/openapi.json",
    operation(
        "get_openapi",
        OPS,
        "This document",
        PUBLIC,
        {"200": {"description": "OpenAPI 3.1.", "content": {JSON: {"schema": {"type": "object"}}}}},
        master=False,
    ),
)
async def openapi(request: web.Request) -> web.Response:
    """This API's OpenAPI 3.1 document (node/http/openapi/spec.py)."""
    return web.Response(body=request.app[OPENAPI_JSON], content_type="application/json")
