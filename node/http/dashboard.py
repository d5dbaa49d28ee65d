"""The dashboard: static files shipped in the package (node/http/ui/), served at ``/ui``.

No build step and nothing from the internet: the page's script, style and the vendored
chart library (node/http/ui/vendor/, README there) are read from the installed package once,
at start. The files need no token; every call the page makes for data does (it asks for
the tokens and sends them as ``Authorization: Bearer``).
"""

from __future__ import annotations

import importlib.resources
from importlib.resources.abc import Traversable

from aiohttp import web

from .errors import ApiError
from .openapi.operations import DASHBOARD_TAG, PUBLIC, operation, path_param
from .route_table import RouteTable

PREFIX = "/ui"
TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}
# The page loads only its own files, can't be framed (the release button), and the browser
# takes each file for the type given.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


def _walk(folder: Traversable, prefix: str) -> dict[str, Traversable]:
    out: dict[str, Traversable] = {}
    for item in folder.iterdir():
        if item.is_dir():
            out.update(_walk(item, f"{prefix}{item.name}/"))
        elif any(item.name.endswith(ext) for ext in TYPES):
            out[f"{prefix}{item.name}"] = item
    return out


def files() -> dict[str, Traversable]:
    """The dashboard's files by URL path (``/ui/app.js``, ...)."""
    return _walk(importlib.resources.files("horologe.node.http") / "ui", f"{PREFIX}/")


ANSWERS = {  # what /ui and its files answer
    "200": {
        "description": "The file: the page (`text/html`), its script, style or images.",
        "content": {t: {"schema": {"type": "string"}} for t in ("text/html", "text/javascript", "text/css")},
    },
    "404": {"$ref": "#/components/responses/NotFound"},
}

routes = RouteTable()  # its operations; the routes themselves are made by add_routes
routes.operation(
    "get",
    PREFIX,
    operation(
        "get_dashboard",
        DASHBOARD_TAG,
        "The dashboard (docs/ui.md)",
        PUBLIC,
        ANSWERS,
        master=False,
    ),
)
routes.operation(
    "get",
    PREFIX + "/{file}",
    operation(
        "get_dashboard_file",
        DASHBOARD_TAG,
        "The dashboard's files",
        PUBLIC,
        ANSWERS,
        master=False,
        parameters=(
            path_param(
                "file",
                {"type": "string", "pattern": "^[A-Za-z0-9._/-]{1,128}$"},
                "a file of it, e.g. `app.js`",
            ),
        ),
    ),
)


def add_routes(app: web.Application) -> None:
    """Serve the files, read now (a few hundred KB): ``/ui`` (and ``/ui/``) is the page,
    ``/ui/<file>`` the rest; two routes whatever the number of files."""
    served = {}
    for path, item in files().items():
        ext = item.name[item.name.rindex(".") :]
        served[path] = (item.read_bytes(), TYPES[ext])
    served[PREFIX] = served[f"{PREFIX}/"] = served[f"{PREFIX}/index.html"]

    async def dashboard(request: web.Request) -> web.Response:
        """The dashboard (static files, no token)."""
        found = served.get(request.path)
        if found is None:
            raise ApiError(404, "not_found", f"no file {request.path}")
        body, kind = found
        charset = "utf-8" if kind.startswith("text/") else None
        return web.Response(body=body, content_type=kind, charset=charset, headers=HEADERS)

    app.router.add_get(PREFIX, dashboard)
    app.router.add_get(PREFIX + r"/{file:[\s\S]*}", dashboard)  # any path below, a newline too: a 404 here
