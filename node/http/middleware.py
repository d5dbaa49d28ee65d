"""The middleware that answers for every route: the token check, and the one place where
errors become answers (node/http/errors.py has the table of statuses)."""

from __future__ import annotations

import hmac

from aiohttp import web

from horologe.cluster import ClusterError, NotMasterError, ProposalTimeoutError
from horologe.storage import StorageFullError

from ..errors import Refused
from . import dashboard
from .common import CONFIG, answer
from .errors import ApiError, error_body

PUBLIC = {"/healthz", "/readyz", "/metrics", "/openapi.json", dashboard.PREFIX}


def is_public(path: str) -> bool:
    """Served without a token: health, metrics, this API's document, the dashboard's files."""
    return path in PUBLIC or path.startswith(f"{dashboard.PREFIX}/")


@web.middleware
async def errors_and_auth(request: web.Request, handler):
    cfg = request.app[CONFIG]
    try:
        if not is_public(request.path):
            want = cfg.admin_token if request.path.startswith("/admin/") else cfg.client_token
            if want:  # unset only under --insecure-dev
                auth = request.headers.get("Authorization", "")
                if not auth.startswith("Bearer "):
                    raise ApiError(401, "unauthorized", "missing Authorization: Bearer <token>")
                if not hmac.compare_digest(auth[7:].encode(), want.encode()):
                    raise ApiError(403, "forbidden", "wrong token for this API")
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
    except ProposalTimeoutError as e:
        return answer(503, error_body("timeout", str(e), leader=None))
    except StorageFullError as e:
        return answer(507, error_body("disk_full", str(e)))
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
