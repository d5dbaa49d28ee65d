"""What probes and scrapers read, without a token: liveness, readiness, metrics and this
API's OpenAPI document."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from .common import METRICS, SERVICE, answer
from .openapi.spec import DOCUMENT_JSON

routes = web.RouteTableDef()


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    """The process is up."""
    return answer(200, {"ok": True})


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    """Ready: a master is known, this node applies, is linked to a quorum and knows its clocks."""
    body = request.app[SERVICE].readiness()
    return answer(200 if body["ready"] else 503, body)


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    """Prometheus metrics of this node (docs/api.md lists them)."""
    body = request.app[METRICS].exposition()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


@routes.get("/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    """This API's OpenAPI 3.1 document (node/http/openapi/spec.py)."""
    return web.Response(body=DOCUMENT_JSON, content_type="application/json")

