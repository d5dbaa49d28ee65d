"""HTTP/1.1 for the blocking clients: the standard library's ``http.client``, connections
kept alive in one idle stack per origin.

Why not ``httpx.Client``: a single produce through the SDK cost 1.2 ms of the client's
CPU on the build machine, against 0.35 ms sent by ``http.client`` from the same process,
and the produce waited 6.5 ms at p50 against 5.1 (docs/benchmarks.md, "Single produce").
Nearly all of the difference was httpx's own request and response machinery (httpcore,
h11, cookies, hooks), which a call with a body of 130 bytes does not need. The asyncio
client keeps ``httpx.AsyncClient``; a client given an httpx ``transport`` (a test's
``MockTransport``) sends through ``httpx.Client`` (:class:`HttpxBlocking`).

Both speak to :func:`horologe.client.calls.run_blocking` alike: ``build`` makes an
:class:`Outgoing`, ``send`` returns its :class:`Reply` or raises the ``httpx`` transport
error httpx would have raised for the same failure, so that the SDK's plan (retry,
pass over a node, never resend what may have applied) reads one set of errors:

- the connection could not be made (refused, no such host, the TLS handshake failed):
  ``httpx.ConnectError``, its cause the ``OSError`` (a certificate that did not verify is
  found there by :func:`horologe.client.tls.certificate_failure`); it took too long:
  ``httpx.ConnectTimeout``;
- the request could not be written: ``httpx.WriteTimeout`` / ``httpx.WriteError``;
- no answer came in time: ``httpx.ReadTimeout`` (the request may have applied); the
  connection broke: ``httpx.ReadError``; it closed before an answer, or the answer was
  not HTTP: ``httpx.RemoteProtocolError``.

An answer the node gave before it took the whole body (a body over its limit: 413) and
closed is still the answer, though the rest of the body could not be written. A
connection is kept only after its answer was read whole and did not ask to close; one
that any error touched is closed. An idle connection the node has closed meanwhile (its
keep-alive ran out) is readable, and is dropped before use rather than sent a request.
Proxy variables are not read: the nodes are dialled directly. A closed client sends
nothing more (``RuntimeError``).
"""

from __future__ import annotations

import http.client
import re
import select
import ssl
import threading
from typing import NamedTuple
from urllib.parse import quote, urlsplit

import httpx

from .calls import Reply

# What httpx percent-encodes (and http.client refuses to send): in a path, controls, space,
# the characters "<>`{} and anything past ASCII; in a query the same but `{} (WHATWG's
# path and query sets). Escapes already there are kept.
_UNSAFE_PATH = re.compile(r'[\x00-\x20\x7f"<>`{}]|[^\x00-\x7f]+')
_UNSAFE_QUERY = re.compile(r'[\x00-\x20\x7f"<>]|[^\x00-\x7f]+')
# Idle connections kept per origin (httpx keeps 20 in all by default); more are closed.
KEEP_IDLE = 16
DEFAULT = object()  # a request's timeout left to the client's


class Outgoing(NamedTuple):
    """One request as the plan built it."""

    method: str
    url: str
    content: bytes | None
    headers: dict[str, str]
    timeout: float | None | object  # s per connect, write and read; None: no limit


Origin = tuple[str, str, int]


class StdlibBlocking:
    """Kept-alive ``http.client`` connections; safe to share between threads (each request
    takes a connection of its own from the origin's idle stack, or a new one)."""

    def __init__(self, timeout: float | None, verify: ssl.SSLContext | bool) -> None:
        self.timeout = timeout
        self._tls = verify if isinstance(verify, ssl.SSLContext) else None
        self._idle: dict[Origin, list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def build(
        self,
        method: str,
        url: str,
        *,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None | object = DEFAULT,
    ) -> Outgoing:
        return Outgoing(method, url, content, headers or {}, timeout)

    def send(self, out: Outgoing) -> Reply:
        parts = urlsplit(out.url)
        origin = (parts.scheme, parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
        target = _UNSAFE_PATH.sub(_escaped, parts.path or "/")
        if parts.query:
            target += "?" + _UNSAFE_QUERY.sub(_escaped, parts.query)
        timeout = self.timeout if out.timeout is DEFAULT else out.timeout
        conn = self._take(origin)
        try:
            if conn.sock is None:
                _connect(conn, timeout)
            else:
                conn.sock.settimeout(timeout)
            status, headers, content, keep = _exchange(
                conn, out.method.upper(), target, out.content, out.headers
            )
        except BaseException:
            conn.close()
            raise
        if keep:
            self._give_back(origin, conn)
        else:
            conn.close()
        return Reply(status, headers=headers, content=content)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle = [c for stack in self._idle.values() for c in stack]
            self._idle.clear()
        for conn in idle:
            conn.close()

    def _take(self, origin: Origin) -> http.client.HTTPConnection:
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot send a request: the client has been closed")
            stack = self._idle.get(origin)
            while stack:
                conn = stack.pop()
                if _still_open(conn):
                    return conn
                conn.close()
        scheme, host, port = origin
        if scheme == "https":
            if self._tls is None:
                raise httpx.UnsupportedProtocol(f"no TLS context for {scheme}://{host}:{port}")
            return http.client.HTTPSConnection(host, port, context=self._tls)
        if scheme != "http":
            raise httpx.UnsupportedProtocol(f"cannot send to a {scheme!r} URL")
        return http.client.HTTPConnection(host, port)

    def _give_back(self, origin: Origin, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            stack = self._idle.setdefault(origin, [])
            if not self._closed and len(stack) < KEEP_IDLE:
                stack.append(conn)
                return
        conn.close()


def _escaped(m: re.Match) -> str:
    return quote(m.group(), safe="")


def _still_open(conn: http.client.HTTPConnection) -> bool:
    """An idle connection has nothing to read: if it has, the node closed it (or sent what
    no request asked for), and it is not to be used. (``poll``, not ``select``: a
    descriptor past 1023 is fine.)"""
    poller = select.poll()
    try:
        poller.register(conn.sock, select.POLLIN)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


def _connect(conn: http.client.HTTPConnection, timeout: float | None) -> None:
    conn.timeout = timeout
    try:
        conn.connect()
    except TimeoutError as e:
        raise httpx.ConnectTimeout(str(e) or "timed out connecting") from e
    except OSError as e:  # refused, unreachable, no such host, a TLS handshake that failed
        raise httpx.ConnectError(str(e) or type(e).__name__) from e


def _write(conn: http.client.HTTPConnection, method: str, target: str, content, headers) -> None:
    try:
        conn.request(method, target, body=content, headers=headers)
    except TimeoutError as e:
        raise httpx.WriteTimeout(str(e) or "timed out writing the request") from e
    except OSError as e:
        raise httpx.WriteError(str(e) or type(e).__name__) from e


def _exchange(
    conn: http.client.HTTPConnection, method: str, target: str, content, headers
) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
    """Write the request, read its answer: status, headers, body, and whether the
    connection may be kept."""
    try:
        _write(conn, method, target, content, headers)
    except httpx.WriteError as unwritten:
        # The node may have answered before it closed (a body over its limit: 413), and
        # that answer is the one to give, as httpx gives it.
        try:
            status, answered_headers, body, _ = _read(conn)
        except httpx.TransportError:
            raise unwritten from unwritten.__cause__
        return status, answered_headers, body, False
    return _read(conn)


def _read(conn: http.client.HTTPConnection) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
    """The answer's status, headers and body, and whether the connection may be kept."""
    try:
        resp = conn.getresponse()
        content = resp.read()
    except TimeoutError as e:
        raise httpx.ReadTimeout(str(e) or "timed out waiting for the answer") from e
    except http.client.RemoteDisconnected as e:
        raise httpx.RemoteProtocolError("the node closed the connection without an answer") from e
    except http.client.HTTPException as e:
        raise httpx.RemoteProtocolError(f"not an HTTP answer: {e!r}") from e
    except OSError as e:
        raise httpx.ReadError(str(e) or type(e).__name__) from e
    # As bytes: a header past ASCII (a proxy's) is kept as it came, as httpx keeps it.
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in resp.getheaders()]
    return resp.status, headers, content, not resp.will_close


class HttpxBlocking:
    """The same calls through an ``httpx.Client``: for a client given an httpx transport."""

    def __init__(
        self, timeout: float | None, verify: ssl.SSLContext | bool, transport: httpx.BaseTransport
    ) -> None:
        self._http = httpx.Client(timeout=timeout, verify=verify, transport=transport)

    def build(
        self, method: str, url: str, *, timeout: float | None | object = DEFAULT, **request
    ) -> httpx.Request:
        return self._http.build_request(
            method, url, **request, **({} if timeout is DEFAULT else {"timeout": timeout})
        )

    def send(self, request: httpx.Request) -> Reply:
        return Reply.of(self._http.send(request))

    def close(self) -> None:
        self._http.close()


def blocking_http(
    timeout: float | None, verify: ssl.SSLContext | bool, transport: httpx.BaseTransport | None
) -> StdlibBlocking | HttpxBlocking:
    """The blocking clients' HTTP: the standard library's, or httpx's when given a transport."""
    if transport is None:
        return StdlibBlocking(timeout, verify)
    return HttpxBlocking(timeout, verify, transport)
