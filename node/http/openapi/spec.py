"""The OpenAPI 3.1 document served at ``GET /openapi.json``, assembled from its parts:
the routes' operations (each declared with its handler: node/http/route_table.py), the
tags and shared answers (node/http/openapi/operations.py) and the body schemas
(node/http/openapi/schemas.py)."""

from __future__ import annotations

import orjson

from .operations import RESPONSES, TAGS
from .schemas import SCHEMAS

DESCRIPTION = (
    "A replicated delayed-message service. Writes and message reads go to the master: other nodes "
    "answer 307 with its URL, and 503 while none is known. Every error is "
    '`{"error": {"code", "message", "field"?}}`. See docs/api.md.'
)


def document(operations: dict[tuple[str, str], dict]) -> dict:
    """The document listing ``operations``: (method, path) -> operation."""
    paths: dict[str, dict] = {}
    for (method, path), op in operations.items():
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


def document_json(operations: dict[tuple[str, str], dict]) -> bytes:
    return orjson.dumps(document(operations))
