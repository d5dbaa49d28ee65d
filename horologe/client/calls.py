"""How one API call goes over HTTP, for Client, AsyncClient and RawClient alike.

A call is written once, as a plan: a generator that yields what to do next, either a
request to send (made by the client's ``build``) or a pause in seconds, and is sent back
what came of it, the :class:`Reply` or the ``httpx.TransportError`` that says the node
could not be reached. :func:`run_blocking` carries a plan out on the blocking clients'
HTTP (:mod:`horologe.client.blocking_http`), :func:`run_async` on an
``httpx.AsyncClient``. So the blocking and the asyncio client build requests, follow the
master, retry and map errors with the same code.

The SDK's plan (:func:`api_call`):

- sends to the master first once one is known, then to the other nodes given;
- follows a 307 with the same method and body, only to a host the client was given
  (:meth:`Endpoints.redirected`), at most ``MAX_REDIRECTS`` in a row;
- goes on to the next node after a 503, a refused connection or a timeout, and starts
  over after ``RETRY_PAUSE_S`` until ``retry_s`` has passed; any other error answer is
  raised at once (:func:`horologe.client.errors.error_for`);
- raises at once when a call that must not be resent timed out after it was sent, or was
  answered a 503 that may have taken effect (``timeout``: the entry may still commit;
  ``transfer_unconfirmed``; a peer that did not answer): only ``REFUSED_503`` are resent;
- raises :class:`CertificateError` at once when a node's TLS certificate does not verify
  (:mod:`horologe.client.tls`): no retry makes it verify, and nothing was sent.

The raw plan (:func:`single`) sends once and returns whatever came back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgpack
import orjson

from .errors import CertificateError, HorologeError, UnavailableError, error_for
from .tls import certificate_failure

MSGPACK = "application/msgpack"
PULL_COLUMNS = MSGPACK + "; layout=columns"  # a pull's answer by columns (node/consumers/wire.py)
RETRY_PAUSE_S = 0.2
log = logging.getLogger(__name__)
# More 307s in a row than this means the nodes do not agree on a master yet: pause, retry.
MAX_REDIRECTS = 3

# The node could not be reached or dropped the connection: worth trying another node.
# Other httpx errors (a URL scheme it cannot send to, a header it cannot write) are the
# caller's and propagate.
UNREACHABLE = (httpx.NetworkError, httpx.TimeoutException, httpx.RemoteProtocolError, httpx.ProxyError)
# Timed out after the request went out, or the connection broke or closed while the answer
# was awaited (an idle one the node closed is dropped before use: blocking_http.py): the
# node may have applied it.
MAYBE_APPLIED = (httpx.ReadTimeout, httpx.WriteTimeout, httpx.ReadError, httpx.RemoteProtocolError)
# The 503s that say nothing was done (no master for a moment, no room for the connection, a
# release whose transfer failed: still master, a node that found its store damaged and
# halted); any other may have taken effect (``timeout``:
# the entry may still commit), and a call that must not be resent is not.
REFUSED_503 = frozenset({"no_master", "too_many_connections", "transfer_failed", "store_damaged"})


_UNREAD = object()


class Reply:
    """One HTTP answer: ``status``, ``body`` (its JSON; a body that is not JSON becomes
    ``{"error": {"message": <text>}}``), ``headers`` (case-insensitive) and ``content``.
    ``body`` is decoded when first asked for (a consumer fetches its next pull while it
    decodes the last one: consuming.py), unless one is given."""

    __slots__ = ("status", "headers", "content", "_body")

    def __init__(self, status: int, body: Any = _UNREAD, headers=None, content: bytes = b"") -> None:
        self.status = status
        self.headers = httpx.Headers(headers)
        self.content = content
        self._body = body

    @classmethod
    def of(cls, response: httpx.Response) -> Reply:
        return cls(response.status_code, _UNREAD, response.headers, response.content)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    @property
    def body(self) -> Any:
        if self._body is _UNREAD:  # two threads may both decode it: the same answer either way
            self._body = parse_body(self.content, self.content_type)
        return self._body

    def __repr__(self) -> str:
        return f"Reply(status={self.status}, body={self.body!r})"

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")

    def result(self):
        """The body of a 2xx answer; any other status raises its :class:`HorologeError`."""
        if 200 <= self.status < 300:
            return self.body
        raise error_for(self.status, self.body)


Build = Callable[..., Any]  # makes a request the client's runner sends (it adds the client's timeouts)
Sent = Reply | httpx.TransportError | None
Plan = Generator[Any, Sent, Any]  # yields a request (of its Build) or a pause (float, s)


def parse_body(raw: bytes | str, content_type: str = ""):
    """An answer's JSON (or msgpack, when it says so); a body that is neither becomes an
    error message."""
    try:
        if content_type.startswith(MSGPACK) and raw:
            return msgpack.unpackb(raw, raw=False, use_list=False)  # tuples: a fifth quicker
        return orjson.loads(raw) if raw else {}
    except (ValueError, msgpack.UnpackException):
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        return {"error": {"message": text}}


def check_token(token: str | None) -> None:
    """Refuse a token the Authorization header cannot carry, before anything is sent."""
    if token is not None and not (isinstance(token, str) and token.isascii() and token.isprintable()):
        raise ValueError("a token must be a string of printable ASCII characters")


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@dataclass(frozen=True)
class Msgpack:
    """A request body to send as msgpack rather than JSON: produce requests, whose message
    bodies then travel as raw bytes, with no base64 on either side."""

    value: Any


def request_headers(token: str | None, body, accept: str | None = None) -> dict[str, str]:
    """Authorization, the content type of the body, and what answer is wanted."""
    headers = auth(token)
    if body is not None:
        headers["Content-Type"] = MSGPACK if isinstance(body, Msgpack) else "application/json"
    if accept is not None:
        headers["Accept"] = accept
    return headers


def request_body(body) -> bytes | None:
    """A request's bytes (None: no body): msgpack for a :class:`Msgpack`, else JSON by
    orjson, or by json for what orjson refuses (a lone surrogate, an int past 64 bits), so
    that the node, not the SDK, answers for it."""
    if body is None:
        return None
    if isinstance(body, Msgpack):
        return msgpack.packb(body.value, use_bin_type=True)
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body).encode()


def node_urls(listed: str) -> list[str]:
    """The node URLs of one string listing them comma-separated, as ``HOROLOGE_URL`` does."""
    return [u.strip() for u in listed.split(",") if u.strip()]


def check_node_url(url: str) -> None:
    """Raise ValueError, saying why, unless ``url`` is an http(s) URL of a host (and port)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - read for its check: a port that is not a number raises
    except ValueError as e:
        raise ValueError(f"{url!r} is not a node URL such as http://127.0.0.1:8081: {e}") from e
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not a node URL such as http://127.0.0.1:8081")


class Endpoints:
    """The known nodes, and the master once a redirect or an answer has named it."""

    def __init__(self, urls) -> None:
        urls = node_urls(urls) if isinstance(urls, str) else list(urls)
        if not urls:
            raise ValueError("give at least one node URL")
        for u in urls:
            check_node_url(u)
        self.urls = [u.rstrip("/") for u in urls]
        self.master: str | None = None

    def order(self) -> list[str]:
        return ([self.master] if self.master else []) + [u for u in self.urls if u != self.master]

    def redirected(self, location: str) -> str:
        """Remember the master a 307 named; credentials go only to hosts the caller gave.

        A node names the master by its configured address, usually another port of a
        host already given; a host not given (or another scheme) is refused rather than
        sent the token.
        """
        parts = urlsplit(location)
        given = {(urlsplit(u).scheme, urlsplit(u).hostname) for u in self.urls}
        if (parts.scheme, parts.hostname) not in given:
            raise UnavailableError(
                f"redirected to {parts.scheme}://{parts.netloc}, a host not among the nodes given; "
                "pass every node's URL to the client"
            )
        self.master = f"{parts.scheme}://{parts.netloc}"
        if self.master not in self.urls:
            self.urls.append(self.master)
        return self.master

    def failed(self, base: str) -> None:
        if self.master == base:
            self.master = None

    def unreachable(self, base: str, error: httpx.TransportError, *, resend: bool) -> UnavailableError:
        """Node ``base`` did not answer: the error to keep while the next node is tried.
        Raises at once for a certificate that does not verify, and for a call that must
        not be resent and timed out once sent."""
        check_certificate(base, error)
        if not resend and isinstance(error, MAYBE_APPLIED):
            raise UnavailableError(
                f"{base}: {_reason(error)}; the call may or may not have applied"
            ) from error
        self.failed(base)
        return UnavailableError(f"{base}: {_reason(error)}")


def api_call(
    endpoints: Endpoints,
    build: Build,
    method: str,
    path: str,
    body,
    token: str | None,
    *,
    retry_s: float,
    resend: bool,
    accept: str | None = None,
) -> Plan:
    """The SDK's plan for one call (see the module docstring); returns the 2xx :class:`Reply`.
    ``accept``: the answer's type wanted, when not JSON (errors come as JSON whatever it is)."""
    deadline = time.monotonic() + retry_s
    content, headers = request_body(body), request_headers(token, body, accept)
    last: HorologeError = UnavailableError("no node answered")
    redirects = 0
    told = False  # that it retries: once a call, at INFO (the CLI shows it)
    while True:
        for base in endpoints.order():
            sent = yield build(method, base + path, content=content, headers=headers)
            if isinstance(sent, httpx.TransportError):
                last = endpoints.unreachable(base, sent, resend=resend)
                continue
            reply = sent
            location = reply.headers.get("location")
            if reply.status == 307 and location:
                if redirects < MAX_REDIRECTS:
                    redirects += 1
                    endpoints.redirected(location)
                    break  # go again, master first
                last = UnavailableError(f"{base}: {redirects} redirects in a row; no agreed master yet")
                endpoints.failed(base)
                continue
            if 200 <= reply.status < 300:
                return reply
            error = error_for(reply.status, reply.body)
            if not isinstance(error, UnavailableError) or not (resend or error.code in REFUSED_503):
                raise error
            last = error  # 503: an election or a handover under way
            endpoints.failed(base)
        else:
            if time.monotonic() > deadline:
                raise last
            if not told:
                log.info("%s; trying again for up to %.0f s", last, deadline - time.monotonic())
                told = True
            redirects = 0
            yield RETRY_PAUSE_S


def single(
    build: Build,
    method: str,
    url: str,
    *,
    body=None,
    content: bytes | None = None,
    token: str | None = None,
    headers: dict[str, str] | None = None,
) -> Plan:
    """Raw mode: send once, follow nothing; the :class:`Reply` whatever its status.
    A node that cannot be reached raises :class:`UnavailableError`."""
    if body is not None:
        content = request_body(body)
    headers = {**request_headers(token, body), **(headers or {})}
    sent = yield build(method, url, content=content, headers=headers)
    if isinstance(sent, httpx.TransportError):
        check_certificate(url, sent)
        raise UnavailableError(f"{url}: {_reason(sent)}") from sent
    return sent


class BlockingPool:
    """For a blocking client holding its kept-alive connections as ``_http`` (a
    :func:`horologe.client.blocking_http.blocking_http`): ``close`` it, or use the client
    in a ``with`` block."""

    _http: Any

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()


def run_blocking(http, plan: Plan):
    """Carry ``plan`` out on ``http`` (its ``send`` answers a :class:`Reply`); returns what
    the plan returns."""
    sent: Sent = None
    try:
        while True:
            step = plan.send(sent)
            if isinstance(step, (int, float)):
                time.sleep(step)
                sent = None
            else:
                try:
                    sent = http.send(step)
                except UNREACHABLE as e:
                    sent = e
    except StopIteration as done:
        return done.value


async def run_async(http: httpx.AsyncClient, plan: Plan):
    """Carry ``plan`` out on ``http``, awaiting; returns what the plan returns."""
    sent: Sent = None
    try:
        while True:
            step = plan.send(sent)
            if isinstance(step, (int, float)):
                await asyncio.sleep(step)
                sent = None
            else:
                try:
                    sent = Reply.of(await http.send(step))
                except UNREACHABLE as e:
                    sent = e
    except StopIteration as done:
        return done.value


def check_certificate(where: str, error: httpx.TransportError) -> None:
    """Raise :class:`CertificateError` when ``error`` is a TLS certificate that did not verify."""
    failed = certificate_failure(error)
    if failed is not None:
        raise CertificateError(
            f"{where}: TLS certificate did not verify ({failed.verify_message or failed}); it must be "
            "signed by a CA the client trusts (ca=, or --ca / HOROLOGE_CA on the command line) "
            "and name the host of the URL"
        ) from error


def _reason(error: httpx.TransportError) -> str:
    return str(error) or type(error).__name__
