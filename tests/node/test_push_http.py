"""The push worker's HTTP client (node/push/client.py) against real sockets on 127.0.0.1: a
small asyncio server here answers each request as the test says, and counts connections
and requests, so reuse, redirects (never followed), timeouts, refused and reset
connections, long bodies, 1xx answers, the connection limit, dropping and HTTPS
certificates are seen from the receiver's side."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from horologe.node.push.client import Origin, PushHttp
from horologe.node.push.sender import Target, outcome, request
from horologe.node.tls import client_context, server_context
from testkit.tls import make_pki

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class Server:
    """Reads requests (head and Content-Length body) and answers each with ``answer(n)``,
    n counting requests from 0: bytes to write, or None to write nothing (and keep the
    connection open), or b"" to close it without answering."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []
        self.closed_by_client = 0

    async def start(self) -> Server:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def origin(self) -> Origin:
        return Origin("http", "127.0.0.1", self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                self.requests.append(head + await reader.readexactly(length))
                reply = self.answer(len(self.requests) - 1)
                if reply == b"":
                    writer.close()
                    return
                if reply is not None:
                    writer.write(reply)
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed_by_client += 1
        finally:
            writer.close()

    async def stop(self) -> None:
        self._server.close()


@pytest.fixture
async def serve():
    made: list[Server] = []

    async def make(answer) -> Server:
        made.append(await Server(answer).start())
        return made[-1]

    yield make
    for s in made:
        await s.stop()


def push(origin: Origin, k: int = 0) -> bytes:
    target = Target.of(f"http://{origin.host}:{origin.port}/hook?x=1")
    fields = {"id": f"0000000{k}", "attempt": 0, "deliveries": 1}
    return request(target, "secret-0123456789", b'{"k": %d}' % k, fields, 1_767_225_600_000)


async def test_an_answer_is_read_and_its_connection_kept(serve):
    server = await serve(lambda n: OK)
    http = PushHttp(8)
    first = await http.post(server.origin, push(server.origin, 0), 5).future
    second = await http.post(server.origin, push(server.origin, 1), 5).future
    assert first.status == second.status == 200 and first.error is None
    assert server.connections == 1 and len(server.requests) == 2
    head = server.requests[0].split(b"\r\n\r\n")[0].split(b"\r\n")
    assert head[0] == b"POST /hook?x=1 HTTP/1.1"
    assert f"Host: 127.0.0.1:{server.port}".encode() in head
    assert b"Content-Type: application/json" in head and b"Horologe-Message-Id: 00000000" in head
    assert any(h.startswith(b"Horologe-Signature: t=1767225600,v1=") for h in head)
    await http.close()


async def test_a_redirect_is_a_status_and_never_followed(serve):
    elsewhere = await serve(lambda n: OK)
    moved = f"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{elsewhere.port}/\r\nContent-Length: 0\r\n\r\n"
    server = await serve(lambda n: moved.encode())
    http = PushHttp(8)
    answer = await http.post(server.origin, push(server.origin), 5).future
    assert answer.status == 302 and not outcome(answer, 0).ok
    assert elsewhere.connections == 0
    await http.close()


async def test_retry_after_is_kept_and_chunked_and_1xx_answers_are_read(serve):
    replies = [
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 429 Too Many\r\nRetry-After: 7\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        OK,
    ]
    server = await serve(lambda n: replies[n])
    http = PushHttp(8)
    answers = [await http.post(server.origin, push(server.origin, k), 5).future for k in range(3)]
    assert [a.status for a in answers] == [204, 429, 200]
    assert answers[1].retry_after == "7" and outcome(answers[1], 0).retry_after_ms == 7000
    assert server.connections == 1  # each read whole: the connection kept
    await http.close()


async def test_a_long_body_is_cut_and_its_connection_closed(serve):
    big = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 1_000_000
    short = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    server = await serve(lambda n: [big, short, OK][n])
    http = PushHttp(8)
    for k in range(3):
        assert (await http.post(server.origin, push(server.origin, k), 5).future).status == 200
    assert server.connections == 3  # neither a cut answer's nor a Connection: close one's kept
    await http.close()


async def test_an_answer_head_past_its_bound_ends_the_request_and_its_connection(serve):
    """A receiver that sent header bytes without end: the parser kept growing one header's
    value (a copy of it all at each chunk) until the push's timeout, up to a minute of the
    master's loop and memory, on as many connections as the subscription's max_in_flight."""
    endless = b"HTTP/1.1 200 OK\r\nX-Long: " + b"y" * 4_000_000
    server = await serve(lambda n: [endless, OK][n])
    http = PushHttp(8)
    answer = await http.post(server.origin, push(server.origin, 0), 30).future
    assert answer.status is None and "head" in answer.error
    assert (await http.post(server.origin, push(server.origin, 1), 5).future).status == 200
    assert server.connections == 2  # the first closed
    await http.close()


async def test_a_timeout_closes_the_connection_and_the_next_request_gets_a_new_one(serve):
    server = await serve(lambda n: None if n == 0 else OK)
    http = PushHttp(8)
    answer = await http.post(server.origin, push(server.origin), 0.2).future
    assert answer.status is None and answer.error == "no answer within 200 ms"
    assert (await http.post(server.origin, push(server.origin, 1), 5).future).status == 200
    assert server.connections == 2
    await asyncio.sleep(0.05)
    assert server.closed_by_client == 1  # the first one, closed at its timeout
    await http.close()


async def test_refused_and_reset_connections_are_failures(serve):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    http = PushHttp(8)
    refused = await http.post(
        Origin("http", "127.0.0.1", port), push(Origin("http", "127.0.0.1", port)), 5
    ).future
    assert refused.status is None and "ConnectionRefusedError" in refused.error
    server = await serve(lambda n: b"")  # reads the request, then closes without answering
    reset = await http.post(server.origin, push(server.origin), 5).future
    assert reset.status is None and reset.error
    garbage = await serve(lambda n: b"SMTP ready\r\n\r\n")
    bad = await http.post(garbage.origin, push(garbage.origin), 5).future
    assert bad.status is None and bad.error.startswith("not an HTTP answer")
    await asyncio.sleep(0.01)  # an aborted connection is counted out when the loop says it is lost
    assert http.open == 0  # none kept
    await http.close()


async def test_at_most_limit_connections_and_the_rest_wait_in_turn(serve):
    server = await serve(lambda n: OK)
    slow = await serve(lambda n: None)  # never answers: holds its connection until dropped
    http = PushHttp(1)
    held = http.post(slow.origin, push(slow.origin), 5)
    waiting = [http.post(server.origin, push(server.origin, k), 5) for k in range(3)]
    await asyncio.sleep(0.1)
    assert http.open == 1 and server.connections == 0 and not any(w.future.done() for w in waiting)
    held.cancel()  # dropped: its connection is closed, the next one opens
    assert (await held.future).error == "dropped"
    answers = await asyncio.gather(*(w.future for w in waiting))
    assert [a.status for a in answers] == [200, 200, 200] and server.connections == 1
    await http.close()


async def test_a_request_whose_time_passed_waiting_for_a_connection_is_answered_unsent(serve):
    """Every connection held by one slow receiver's requests: another subscription's waited
    in the pool until its timeout and was counted a failed attempt, and after the last
    retry level its message went to the DLQ, its receiver never asked."""
    slow = await serve(lambda n: None)
    other = await serve(lambda n: OK)
    http = PushHttp(2)
    held = [http.post(slow.origin, push(slow.origin, k), 30) for k in range(2)]
    answer = await http.post(other.origin, push(other.origin), 0.2).future
    assert (answer.status, answer.unsent, other.connections) == (None, True, 0)
    assert "no connection free" in answer.error
    assert not any(h.future.done() for h in held)
    await http.close()


async def test_a_slow_origin_over_its_share_hands_a_freed_connection_to_another_that_waits():
    """A subscription with a slow receiver and more requests than connections kept every
    connection: each one freed went to its next request (first come, first served), and
    another origin's requests waited behind all of them."""
    done: list[str] = []
    connections = {0.3: 0, 0: 0}

    async def answer_after(delay_s: float, reader, writer) -> None:
        connections[delay_s] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                await asyncio.sleep(delay_s)
                writer.write(OK)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    servers = [
        await asyncio.start_server(lambda r, w, d=d: answer_after(d, r, w), "127.0.0.1", 0) for d in (0.3, 0)
    ]
    slow, fast = (Origin("http", "127.0.0.1", s.sockets[0].getsockname()[1]) for s in servers)
    http = PushHttp(4)

    def post(origin: Origin, name: str) -> asyncio.Future:
        future = http.post(origin, push(origin), 10).future
        future.add_done_callback(lambda f: done.append(name))
        return future

    futures = [post(slow, f"slow{k}") for k in range(8)]  # 4 sent, 4 wait for a connection
    await asyncio.sleep(0.05)
    futures += [post(fast, f"fast{k}") for k in range(2)]
    answers = await asyncio.gather(*futures)
    assert all(a.status == 200 for a in answers)
    assert done.index("fast1") < done.index("slow4"), done  # not behind every slow request
    # One slow connection handed on for each fast one made (not each slow one that ended in
    # that turn), and each handed on made again once: at most 4 + 2.
    assert connections[0.3] <= 6 and connections[0] <= 2, connections
    await http.close()
    for server in servers:
        server.close()


async def test_an_answer_read_whole_in_one_chunk_is_not_counted_against_the_next_head(serve):
    """A kept connection took its next request as it read the last answer: that answer's
    bytes (a 65,500-byte body in one read) were counted against the next answer's head,
    which failed at once (over 64 KiB) and was nacked."""
    big = b"HTTP/1.1 200 OK\r\nContent-Length: 65500\r\n\r\n" + b"x" * 65500
    server = await serve(lambda n: [big, OK][n])
    http = PushHttp(1)
    first, second = (http.post(server.origin, push(server.origin, k), 5) for k in range(2))
    answers = await asyncio.gather(first.future, second.future)
    assert [(a.status, a.error) for a in answers] == [(200, None), (200, None)]
    assert server.connections == 1
    await http.close()


async def test_an_idle_connection_to_one_origin_makes_room_for_another_at_the_limit(serve):
    """Every slot held by idle kept-alive connections (one subscription's burst, then
    quiet), another origin's request waited until the sweep closed one, 15 to 20 s later:
    it timed out first, its receiver healthy."""
    first = await serve(lambda n: OK)
    second = await serve(lambda n: OK)
    http = PushHttp(1)
    assert (await http.post(first.origin, push(first.origin), 5).future).status == 200
    answer = await http.post(second.origin, push(second.origin), 2).future
    assert answer.status == 200, answer.error
    assert http.open == 1
    await http.close()


async def test_a_connect_that_times_out_as_it_is_made_frees_its_slot_once(serve, monkeypatch):
    """A connection made just as its connect timed out (a stalled loop, a TLS handshake
    ending at the deadline) is closed by asyncio, and its slot was given back twice: by
    the failed connect and by the connection's loss. The pool then held more connections
    than its limit."""
    from horologe.node.push import client

    server = await serve(lambda n: OK)
    made = client._Connection.__init__

    def slow(self, *args) -> None:
        time.sleep(0.1)  # the loop stalls as the connection is made: the deadline passes
        made(self, *args)

    monkeypatch.setattr(client._Connection, "__init__", slow)
    http = PushHttp(1)
    lost = await http.post(server.origin, push(server.origin), 0.05).future
    assert lost.status is None
    await asyncio.sleep(0.05)
    assert http.open == 0
    await http.close()


@pytest.fixture
def hanging():
    """An origin whose connects hang: a listener whose backlog is full, SYNs dropped."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fill = []
    for _ in range(4):
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fill.append(c)
    yield Origin("http", "127.0.0.1", port)
    for c in fill:
        c.close()
    listener.close()


async def test_a_connect_that_hangs_gives_up_its_slot_with_its_request(serve, hanging):
    """A receiver whose host drops SYNs held its connection slot for the system's connect
    timeout (minutes) after its request had timed out: a few such took every slot, and
    every other subscription's pushes timed out waiting."""
    server = await serve(lambda n: OK)
    http = PushHttp(1)
    lost = await http.post(hanging, push(hanging), 0.1).future
    assert lost.error == "no answer within 100 ms"
    answer = await http.post(server.origin, push(server.origin), 2).future
    assert answer.status == 200, answer.error
    await http.close()


async def test_close_ends_open_requests(serve):
    server = await serve(lambda n: None)
    http = PushHttp(8)
    open_ = http.post(server.origin, push(server.origin), 5)
    await asyncio.sleep(0.05)
    await http.close()
    assert (await open_.future).error == "closed"
    after = http.post(server.origin, push(server.origin), 5)
    assert (await after.future).error == "closed"


async def test_https_certificates_are_verified(tmp_path):
    pki = make_pki(str(tmp_path / "tls"), ["n2"])
    server = await asyncio.start_server(_answer_once, "127.0.0.1", 0, ssl=server_context(*pki.certs["n2"]))
    origin = Origin("https", "127.0.0.1", server.sockets[0].getsockname()[1])
    trusting = PushHttp(8, client_context(pki.ca))
    assert (await trusting.post(origin, push(origin), 5).future).status == 200
    await trusting.close()
    default = PushHttp(8)  # the system's CAs: the test CA is not one of them
    refused = await default.post(origin, push(origin), 5).future
    assert refused.status is None and "CERTIFICATE_VERIFY_FAILED" in refused.error
    await default.close()
    server.close()


async def _answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        writer.write(OK)
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass  # the client refused the certificate
    finally:
        writer.close()
