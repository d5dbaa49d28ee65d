"""The routes of one handler module, each with its OpenAPI operation: the one table that
``create_app`` registers and ``/openapi.json`` lists (node/http/openapi/spec.py).

``@routes.post("/v1/messages", operation(...))`` registers the handler as aiohttp's
``RouteTableDef`` does and records the operation under the route's method and its path
as OpenAPI writes it (``{id}`` for aiohttp's ``{id:<regex>}``). The operation says the
route's token scope and whether it answers only on the master (node/http/openapi/
operations.py): ``scopes`` gives each registered route its operation's scope, which the
middleware checks the token by; and a route whose operation has the master rule is
registered with the master check before its handler (:func:`on_master`), so a follower
redirects it, and a master that may not serve now refuses it, before anything the request
says is read. The check comes after the middleware (the token, then ``Horologe-Forward-To``:
a follower sends a dashboard's call on to the master unchecked).
"""

from __future__ import annotations

import functools
import re

from aiohttp import web

from .common import SERVICE
from .openapi.operations import on_master_only

_REGEX_PART = re.compile(r"\{(\w+):[^/]*\}")


def on_master(handler):
    """The handler, behind the master check (NodeService.require_master: a follower's 307, a
    503 while no master may serve); a master that may not serve for a moment holds the
    request until it may (node/master_hold.py)."""

    @functools.wraps(handler)
    async def checked(request: web.Request) -> web.StreamResponse:
        await request.app[SERVICE].hold.check()
        return await handler(request)

    return checked


def openapi_path(path: str) -> str:
    """``/v1/messages/{id:[0-9a-f]{16}}`` -> ``/v1/messages/{id}``."""
    return _REGEX_PART.sub(r"{\1}", path)


class RouteTable(web.RouteTableDef):
    def __init__(self) -> None:
        super().__init__()
        self.operations: dict[tuple[str, str], dict] = {}  # (method, OpenAPI path) -> operation

    def operation(self, method: str, path: str, operation: dict) -> None:
        """Record a route registered some other way (the dashboard's, made at start)."""
        key = (method.lower(), openapi_path(path))
        if key in self.operations:
            raise ValueError(f"{method.upper()} {path} is in the table twice")
        self.operations[key] = operation

    def _add(method: str):  # noqa: N805 - makes the methods below
        def add(self, path: str, operation: dict, **kwargs):
            """Register the handler decorated for this method and path (aiohttp's keyword
            arguments), with its operation, behind the master check when the operation has
            the master rule. The decorated function is returned as it was."""
            self.operation(method, path, operation)
            register = getattr(web.RouteTableDef, method)(self, path, **kwargs)
            if not on_master_only(operation):
                return register

            def checked(handler):
                register(on_master(handler))
                return handler

            return checked

        return add

    get, post, put, patch, delete = map(_add, ("get", "post", "put", "patch", "delete"))
    del _add


def scopes(app: web.Application, operations: dict[tuple[str, str], dict]) -> dict[object, str | None]:
    """Each route the app registers -> the token scope its operation names (None: public);
    and each resource (a path) whose routes all share one scope -> that scope, for a
    method the path does not take (its 405). aiohttp's HEAD twin of a GET takes the GET's.
    A route with no operation is refused here, at start, rather than served with a guessed
    scope."""
    found: dict[object, str | None] = {}
    by_resource: dict[object, set] = {}
    for route in app.router.routes():
        method = "get" if route.method == "HEAD" else route.method.lower()
        key = (method, openapi_path(route.resource.canonical))
        if key not in operations:
            raise ValueError(f"{route.method} {key[1]} has no operation in any route table")
        security = operations[key]["security"]
        found[route] = next(iter(security[0])) if security else None
        by_resource.setdefault(route.resource, set()).add(found[route])
    found.update({resource: next(iter(s)) for resource, s in by_resource.items() if len(s) == 1})
    return found
