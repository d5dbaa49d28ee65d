"""The OpenAPI 3.1 document served at ``GET /openapi.json``, assembled from its parts:
the operations and their tags (node/http/openapi/routes.py) and the body schemas
(node/http/openapi/schemas.py)."""

from __future__ import annotations

import orjson

from .routes import RESPONSES, ROUTES, TAGS
from .schemas import SCHEMAS

DESCRIPTION = (
    "A replicated delayed-message service. Writes and message reads go to the master: other nodes "
    "answer 307 with its URL, and 503 while none is known. Every error is "
    '`{"error": {"code", "message", "field"?}}`. See docs/api.md.'
)


def document() -> dict:
    paths: dict[str, dict] = {}
    for (method, path), op in ROUTES.items():
        paths.setdefault(path, {})[method] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "Horologe", "version": "1", "description": DESCRIPTION},
        "tags": TAGS,
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "responses": RESPONSES,
            "securitySchemes": {
                "clientToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "the client token (`client_token`, HOROLOGE_CLIENT_TOKEN): /v1/*",
                },
                "adminToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "the admin token (`admin_token`, HOROLOGE_ADMIN_TOKEN): /admin/*",
                },
            },
        },
    }


DOCUMENT_JSON = orjson.dumps(document())
