"""The middleware that answers for every route: the token check, by the scope of the
route's operation (node/http/route_table.py), and the one place where errors become
answers (node/http/errors.py has the table of statuses)."""

from __future__ import annotations

import hmac

from aiohttp import web

from horologe.cluster import ClusterError, EntryDroppedError, NotMasterError, ProposalTimeoutError
from horologe.storage import CorruptLogError, StorageFullError

from ..config import NodeConfig
from ..errors import Refused
from .common import CONFIG, DAMAGE, SCOPES, answer
from .errors import ApiError, error_body
from .openapi.operations import ADMIN, CLIENT

UNMATCHED = "unmatched"  # no route: its 404 for a caller that holds either token


def tokens(cfg: NodeConfig, scope: str | None) -> list[str]:
    """The tokens that open a route of this scope; none for a public route, and none for
    any route under --insecure-dev (no token set)."""
    if scope is None:
        return []
    wanted = {CLIENT: [cfg.client_token], ADMIN: [cfg.admin_token]}.get(
        scope, [cfg.client_token, cfg.admin_token]
    )
    return [t for t in wanted if t]


def check_token(request: web.Request, wanted: list[str]) -> None:
    auth = request.headers.get("Authorization", "")
    if not auth.startswith("Bearer "):
        raise ApiError(401, "unauthorized", "missing Authorization: Bearer <token>")
    given = auth[7:].encode("utf-8", "surrogateescape")  # bytes not UTF-8 come as surrogates
    if not any(hmac.compare_digest(given, t.encode()) for t in wanted):
        raise ApiError(403, "forbidden", "wrong token for this API")


async def scope_of(request: web.Request) -> str | None:
    """The token scope of the route ``request`` matched; for a method its path does not
    take (405), the scope the path's routes share; else UNMATCHED."""
    scopes = request.app[SCOPES]
    info = request.match_info
    if info.route in scopes:
        return scopes[info.route]
    if isinstance(info.http_exception, web.HTTPMethodNotAllowed):
        for resource in request.app.router.resources():
            _, allowed = await resource.resolve(request)
            if allowed:  # its path, another method
                return scopes.get(resource, UNMATCHED)
    return UNMATCHED


@web.middleware
async def errors_and_auth(request: web.Request, handler):
    try:
        wanted = tokens(request.app[CONFIG], await scope_of(request))
        if wanted:
            check_token(request, wanted)
        return await handler(request)
    except ApiError as e:
        return answer(e.status, e.body())
    except Refused as e:
        refusal = ApiError.of(e)
        return answer(refusal.status, refusal.body())
    except NotMasterError as e:
        if e.leader is None:
            return answer(503, error_body("no_master", str(e), leader=None))
        # e.leader is the master's URL, scheme included: a node behind TLS sends to https://
        raise web.HTTPTemporaryRedirect(f"{e.leader}{request.rel_url}") from e
    except EntryDroppedError as e:  # the master lost its place first: as no master, a moment
        return answer(503, error_body("no_master", str(e), leader=None))
    except ProposalTimeoutError as e:
        return answer(503, error_body("timeout", str(e), leader=None))
    except StorageFullError as e:
        return answer(507, error_body("disk_full", str(e)))
    except CorruptLogError as e:  # this replica halts (node/store_damage.py); nothing was done
        request.app[DAMAGE].seen(e)
        why = "this node found its store damaged and stopped serving; another node serves"
        return answer(503, error_body("store_damaged", why, leader=None))
    except ClusterError as e:
        return answer(503, error_body("unavailable", str(e), leader=None))
    except web.HTTPRequestEntityTooLarge:
        return answer(413, error_body("too_large", "request body too large"))
    except web.HTTPError as e:  # the router's 404 and 405: the JSON error shape too, Allow kept
        code = "_".join(e.reason.lower().split())
        response = answer(e.status, error_body(code, f"{e.reason}: {request.method} {request.path}"))
        if "Allow" in e.headers:
            response.headers["Allow"] = e.headers["Allow"]
        return response
