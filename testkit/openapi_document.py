"""The OpenAPI document a node serves, read from an app that is not started."""

from __future__ import annotations

import orjson
from aiohttp import web
from aiohttp.test_utils import make_mocked_request


async def served_document(app: web.Application) -> dict:
    """The body the registered GET /openapi.json route answers (the route needs no service)."""
    route = next(
        r for r in app.router.routes() if r.method == "GET" and r.resource.canonical == "/openapi.json"
    )
    response = await route.handler(make_mocked_request("GET", "/openapi.json", app=app))
    assert response.status == 200 and response.content_type == "application/json"
    return orjson.loads(response.body)
