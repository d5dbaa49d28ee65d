"""A small blocking HTTP client for the CLI: JSON in and out, follows 307 to the master
with the same method and body, retries 503 (election under way) for a while."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from urllib.parse import urljoin

from horologe.client.calls import parse_body


class ApiCallError(Exception):
    """Raised when the API answers an error; carries the status and the JSON error."""

    def __init__(self, status: int, body: dict) -> None:
        err = body.get("error", {}) if isinstance(body, dict) else {}
        super().__init__(f"HTTP {status}: {err.get('code', '?')}: {err.get('message', body)}")
        self.status = status
        self.body = body


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def call(
    method: str, url: str, token: str | None, body=None, *, retry_s: float = 10.0, timeout: float = 10.0
):
    """Send one request; return (status, json). Follows 307; retries 503 up to ``retry_s``."""
    data = None if body is None else json.dumps(body).encode()
    deadline = time.monotonic() + retry_s
    hops = 0
    while True:
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with _opener.open(req, timeout=timeout) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else {}
        except urllib.error.HTTPError as e:
            payload = parse_body(e.read())
            if e.code == 307 and hops < 3:
                url = urljoin(url, e.headers["Location"])
                hops += 1
                continue
            if e.code == 503 and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            raise ApiCallError(e.code, payload) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            if time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            raise ApiCallError(0, {"error": {"code": "unreachable", "message": str(e)}}) from None
