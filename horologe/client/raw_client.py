"""The raw client: one request, one answer, for tests and tools that judge answers themselves."""

from __future__ import annotations

import functools
import os
import ssl

import httpx

from . import calls, tls
from .blocking_http import DEFAULT, blocking_http
from .calls import Reply


class RawClient(calls.BlockingPool):
    """Sends each request once, to the URL given: no redirect followed, no retry, and no
    error raised for any status, so a 307, a 503 or a 4xx comes back as a :class:`Reply`
    to look at. A node that cannot be reached raises :class:`UnavailableError`, one whose
    certificate does not verify :class:`CertificateError`.

    Same pooled, kept-alive connections as the SDK clients; ``close`` it (or use ``with``)
    when done. Safe to share between threads.
    """

    def __init__(
        self,
        *,
        timeout: float | None = 10.0,
        ca: str | os.PathLike | None = None,
        verify: bool | ssl.SSLContext = True,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """``timeout``: seconds per request (None: no limit); ``ca`` and ``verify``: how
        certificates are checked on https:// URLs, as for :class:`horologe.client.Client`;
        ``transport``: an httpx transport."""
        self._http = blocking_http(timeout, tls.verify_setting(ca, verify), transport)

    def request(
        self,
        method: str,
        url: str,
        body=None,
        *,
        token: str | None = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None | object = DEFAULT,
    ) -> Reply:
        """``body`` goes as JSON, or ``content`` as bytes as they are; ``token`` as Bearer;
        ``timeout`` (s; None: no limit) for this request instead of the client's."""
        calls.check_token(token)
        build = functools.partial(self._http.build, timeout=timeout)
        plan = calls.single(build, method, url, body=body, content=content, token=token, headers=headers)
        return calls.run_blocking(self._http, plan)

    def get(self, url: str, **options) -> Reply:
        return self.request("GET", url, **options)

    def post(self, url: str, body=None, **options) -> Reply:
        return self.request("POST", url, body, **options)

    def delete(self, url: str, **options) -> Reply:
        return self.request("DELETE", url, **options)
