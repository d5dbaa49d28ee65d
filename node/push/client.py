"""The push worker's HTTP/1.1 client: kept-alive connections pooled per origin, one
request at a time on each, answers parsed by httptools (llhttp, the parser of Node.js).

It exists because a push through ``aiohttp.ClientSession.post`` cost the master about
280 µs of CPU (half of all it spent on a push; docs/benchmarks.md, "Push delivery"):
per request that client builds a request object, a response object, a payload, a timer
context and a task, where a push needs a write of prepared bytes and a status back.

:meth:`PushHttp.post` writes a request (head and body, as bytes: node/push/sender.py
makes them) to an origin; the :class:`Exchange` it returns has a future of the
:class:`Answer`:

* the status and the ``Retry-After`` header once the status line, the headers and the
  body are read; a body longer than ``ANSWER_BYTES_READ`` is not read further, and its
  connection is closed. 1xx answers are passed over. A head (status line and headers,
  1xx answers included) past ``ANSWER_HEAD_BYTES`` is no answer. Nothing else of an
  answer is kept, and a redirect is only a status: it is never followed;
* no status (``status`` None, ``error`` saying why) when the connection was refused, could
  not be made (TLS certificates are verified) or was closed or reset before the answer
  was whole, when the answer is not HTTP, or when ``timeout_s`` (counted from the call,
  the wait for a free connection included) passed first; the connection is then closed.
  A request whose time passed while it waited for a connection is answered ``unsent``:
  its origin was never asked (other origins' requests held every connection).

A connection is kept for the next request to its origin only when its answer was read
whole and allows it (HTTP/1.1 without ``Connection: close``); one idle for ``IDLE_S`` is
closed, and so is the connection of a request dropped (:meth:`Exchange.cancel`). At most
``limit`` connections are open over all origins; a request beyond waits, in call order
among its origin's. A slot freed goes to the waiting origin with the fewest connections,
and a connection that finished a request is handed on to a waiting origin holding at
least two fewer than its own: one whose receiver is slow cannot hold every connection
for long while another's requests wait.
Runs on the event loop that calls it; :meth:`close` aborts every
connection and ends every open request with ``error`` "closed".
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import time
from typing import NamedTuple

import httptools

ANSWER_BYTES_READ = 64 * 1024  # of an answer's body; past that the connection is closed
# Of an answer's status line and headers (1xx answers before it included): past that it is
# no answer, and its connection is closed (a header value is read whole, copied each chunk).
ANSWER_HEAD_BYTES = 64 * 1024
IDLE_S = 15.0  # an idle connection is closed after this long
SWEEP_S = 5.0  # how often idle connections are looked at


class Origin(NamedTuple):
    scheme: str  # "http" or "https"
    host: str  # a name or an IP address (an IPv6 one without brackets)
    port: int


class Answer(NamedTuple):
    status: int | None  # None: no answer (error says why)
    retry_after: str | None = None  # the answer's Retry-After, as sent
    error: str | None = None
    unsent: bool = False  # its time passed while it waited for a connection: never sent


class Exchange:
    """One request sent (or waiting for a connection): ``future`` gets its answer."""

    __slots__ = ("origin", "data", "future", "timer", "conn", "deadline", "waiting")

    def __init__(self, origin: Origin, data: bytes, future: asyncio.Future) -> None:
        self.origin = origin
        self.data = data
        self.future = future
        self.timer: asyncio.TimerHandle | None = None
        self.conn: _Connection | None = None
        self.deadline = 0.0  # the loop's time its answer is due by
        self.waiting = False  # waits for a connection (none made for it yet)

    def cancel(self) -> None:
        """Drop the request: its connection is closed, its answer ``error`` "dropped"."""
        _settle(self, Answer(None, None, "dropped"))
        conn, self.conn = self.conn, None
        if conn is not None and conn.req is self:
            conn.req = None
            conn.abort()


def _settle(req: Exchange, answer: Answer) -> None:
    if req.timer is not None:
        req.timer.cancel()
    if not req.future.done():
        req.future.set_result(answer)


class _Connection(asyncio.Protocol):
    """One connection to an origin: at most one request on it at a time."""

    def __init__(self, pool: PushHttp, origin: Origin) -> None:
        self.pool = pool
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.req: Exchange | None = None
        self.status: int | None = None
        self.retry_after: str | None = None
        self.body_read = 0
        self.head_read = 0  # bytes read before the answer's head was whole
        self.idle_since = 0.0
        self.closed = False

    # -- the pool's side -------------------------------------------------------------

    def send(self, req: Exchange) -> None:
        self.req, req.conn = req, self
        self.status = self.retry_after = None
        self.body_read = self.head_read = 0
        self.transport.write(req.data)

    def abort(self) -> None:
        if not self.closed and self.transport is not None:
            self.transport.abort()  # connection_lost follows, from the loop

    # -- asyncio's side --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.pool._made(self)

    def data_received(self, data: bytes) -> None:
        if self.req is None:  # nothing was asked: not HTTP as this client speaks it
            self.abort()
            return
        req = self.req
        try:
            self.parser.feed_data(data)
            if self.status is None and self.req is req:  # its head is not whole yet
                self.head_read += len(data)
                if self.head_read > ANSWER_HEAD_BYTES:
                    why = f"an answer head over {ANSWER_HEAD_BYTES} bytes"
                    self._end(Answer(None, None, why), keep=False)
        except httptools.HttpParserUpgrade:
            self._end(Answer(None, None, "the answer asked to upgrade the connection"), keep=False)
        except httptools.HttpParserError as e:
            if self.req is not None:  # not when a callback below ended the request already
                self._end(Answer(None, None, f"not an HTTP answer: {e}"), keep=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.req is not None:
            if self.status is not None and self.status >= 200:  # a body that ends at the close
                self._end(Answer(self.status, self.retry_after), keep=False)
            else:
                why = f"{type(exc).__name__}: {exc}" if exc else "closed before an answer"
                self._end(Answer(None, None, why), keep=False)
        self.pool._lost(self)

    # -- httptools' callbacks ---------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 11 and name.lower() == b"retry-after":
            self.retry_after = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self.body_read += len(body)
        if self.body_read >= ANSWER_BYTES_READ and self.req is not None:
            self._end(Answer(self.status, self.retry_after), keep=False)

    def on_message_complete(self) -> None:
        if self.status is not None and 100 <= self.status < 200:
            self.status = self.retry_after = None  # interim (100 Continue): the answer follows
            return
        if self.req is not None:
            self._end(Answer(self.status, self.retry_after), keep=self.parser.should_keep_alive())

    def _end(self, answer: Answer, keep: bool) -> None:
        req, self.req = self.req, None
        _settle(req, answer)
        if keep and not self.closed:
            self.pool._release(self)
        else:
            self.abort()


class PushHttp:
    def __init__(self, limit: int, ssl_context: ssl.SSLContext | None = None) -> None:
        """``limit``: connections open at most, over all origins. ``ssl_context``: for
        https origins (default: the system's CAs, certificates and names verified)."""
        self.limit = limit
        self._ssl = ssl_context
        self._loop = asyncio.get_running_loop()
        self._idle: dict[Origin, list[_Connection]] = collections.defaultdict(list)
        # Requests waiting for a connection, by origin (in turn: the first origin is served
        # next, then goes last), each origin's in call order; an origin with none left out.
        self._waiting: dict[Origin, collections.deque[Exchange]] = {}
        self._open_of: collections.Counter[Origin] = collections.Counter()  # open or being made
        self._conns: set[_Connection] = set()
        self._connecting: set[asyncio.Task] = set()
        self.open = 0  # connections open or being made
        self._closed = False
        self._sweeper = self._loop.call_later(SWEEP_S, self._sweep)

    def post(self, origin: Origin, data: bytes, timeout_s: float) -> Exchange:
        """Send ``data`` (a whole request) to ``origin``; its future's result is the answer."""
        req = Exchange(origin, data, self._loop.create_future())
        if self._closed:
            _settle(req, Answer(None, None, "closed"))
            return req
        req.timer = self._loop.call_later(timeout_s, self._timed_out, req, timeout_s)
        req.deadline = self._loop.time() + timeout_s
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            if not conn.closed:
                conn.send(req)
                return req
        if self.open < self.limit:
            self._connect(req)
        else:
            req.waiting = True
            self._waiting.setdefault(origin, collections.deque()).append(req)
            self._close_an_idle()
        return req

    async def close(self) -> None:
        """Abort every connection; open requests end with ``error`` "closed"."""
        self._closed = True
        self._sweeper.cancel()
        for task in list(self._connecting):
            task.cancel()
        await asyncio.gather(*self._connecting, return_exceptions=True)
        for queue in self._waiting.values():
            for req in queue:
                _settle(req, Answer(None, None, "closed"))
        self._waiting.clear()
        for conn in list(self._conns):
            if conn.req is not None:
                conn._end(Answer(None, None, "closed"), keep=False)
            conn.abort()
        self._idle.clear()

    # -- connections -------------------------------------------------------------------

    def _connect(self, req: Exchange) -> None:
        self.open += 1
        self._open_of[req.origin] += 1
        task = self._loop.create_task(self._make(req))
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    async def _make(self, req: Exchange) -> None:
        origin = req.origin
        made: list[_Connection] = []

        def protocol() -> _Connection:
            made.append(_Connection(self, origin))
            return made[-1]

        def give_back_slot() -> None:
            """A connect that failed: its slot is free, unless its connection was made (and
            closed by asyncio as the connect failed): ``_lost`` gives that one back."""
            if not (made and made[0] in self._conns):
                self._freed(origin)

        try:
            # No longer than its request waits: a host that drops SYNs would hold the slot
            # for the system's connect timeout (minutes), and other origins' requests time
            # out waiting for one.
            async with asyncio.timeout_at(req.deadline):
                _transport, conn = await self._loop.create_connection(
                    protocol,
                    origin.host,
                    origin.port,
                    ssl=self._context() if origin.scheme == "https" else None,
                )
        except asyncio.CancelledError:
            give_back_slot()
            _settle(req, Answer(None, None, "closed"))
            raise
        except Exception as e:  # noqa: BLE001 - refused, unreachable, a name not found, TLS
            give_back_slot()
            _settle(req, Answer(None, None, f"{type(e).__name__}: {e}"))
            return
        if conn.closed:
            _settle(req, Answer(None, None, "closed as soon as it was made"))
        elif req.future.done():  # timed out meanwhile: the connection serves the next one
            self._release(conn)
        else:
            conn.send(req)

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    def _release(self, conn: _Connection) -> None:
        """``conn`` finished a request and may take the next: its origin's, unless another
        origin waits holding at least two connections fewer (its slot is handed on); with
        none of its origin's waiting, another origin's request takes its slot."""
        if self._closed:
            conn.abort()
            return
        origin = conn.origin
        fewest = min((self._open_of[o] for o in self._waiting if o != origin), default=None)
        req = None
        if fewest is None or fewest + 1 >= self._open_of[origin]:
            req = self._take_waiting(origin)
        if req is not None:
            conn.send(req)
        elif self._waiting:
            self._hand_on(conn)
        else:
            conn.idle_since = time.monotonic()
            self._idle[origin].append(conn)

    def _hand_on(self, conn: _Connection) -> None:
        """Close ``conn`` for a waiting request of another origin: its slot is free now
        (counted at once, not when the close is done: the next release in this turn
        sees it)."""
        if conn in self._conns:
            self._conns.discard(conn)
            conn.abort()
            self._freed(conn.origin)

    def _take_waiting(self, origin: Origin) -> Exchange | None:
        """The next request of ``origin`` that still waits (one that timed out is passed over)."""
        queue = self._waiting.get(origin)
        while queue:
            req = queue.popleft()
            if not req.future.done():
                if not queue:
                    del self._waiting[origin]
                req.waiting = False
                return req
        self._waiting.pop(origin, None)
        return None

    def _close_an_idle(self) -> None:
        """Every slot is taken and a request waits: the connection idle longest, if any,
        is closed, and its slot goes to the waiting (``_lost``). An idle connection ends
        no request, so nothing else would make room until the sweep."""
        idle = [conn for conns in self._idle.values() for conn in conns if not conn.closed]
        if idle:
            oldest = min(idle, key=lambda conn: conn.idle_since)
            self._idle[oldest.origin].remove(oldest)
            oldest.abort()

    def _made(self, conn: _Connection) -> None:
        self._conns.add(conn)

    def _lost(self, conn: _Connection) -> None:
        if conn in self._conns:
            self._conns.discard(conn)
            self._freed(conn.origin)

    def _freed(self, origin: Origin) -> None:
        """A connection of ``origin`` closed, or was never made: its slot is free."""
        self.open -= 1
        self._open_of[origin] -= 1
        if not self._open_of[origin]:
            del self._open_of[origin]
        self._next_waiting()

    def _next_waiting(self) -> None:
        """Free slots to the waiting origins, one request at a time, each to the origin with
        the fewest connections (of those, the one served longest ago)."""
        while self._waiting and not self._closed and self.open < self.limit:
            origin = min(self._waiting, key=self._open_of.__getitem__)
            req = self._take_waiting(origin)
            if req is not None:
                if origin in self._waiting:  # its turn taken: it goes last
                    self._waiting[origin] = self._waiting.pop(origin)
                self._connect(req)

    def _timed_out(self, req: Exchange, timeout_s: float) -> None:
        req.timer = None
        if req.waiting:
            why = f"no connection free within {timeout_s * 1000:.0f} ms (other origins held them)"
            _settle(req, Answer(None, None, why, unsent=True))
            queue = self._waiting.get(req.origin)
            if queue is not None and req in queue:  # out of the turns: it waits no more
                queue.remove(req)
                if not queue:
                    del self._waiting[req.origin]
            return
        _settle(req, Answer(None, None, f"no answer within {timeout_s * 1000:.0f} ms"))
        req.cancel()

    def _sweep(self) -> None:
        cutoff = time.monotonic() - IDLE_S
        for origin, idle in list(self._idle.items()):
            keep = [c for c in idle if not c.closed]
            for conn in keep:
                if conn.idle_since < cutoff:
                    conn.abort()
            keep = [c for c in keep if c.idle_since >= cutoff]
            if keep:
                self._idle[origin] = keep
            else:
                del self._idle[origin]
        self._sweeper = self._loop.call_later(SWEEP_S, self._sweep)
