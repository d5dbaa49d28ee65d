"""The blocking clients' HTTP (horologe/client/blocking_http.py) against a real socket: a
small server here answers as told, so that kept-alive, closed, silent and absent nodes
can each be met on purpose."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import httpx
import pytest

from horologe.client import Client, RawClient, UnavailableError
from horologe.client.blocking_http import StdlibBlocking

CREATED = b'{"id": "0000000000000000000000000001", "topic": "t", "deliver_at": 1}'


class Node:
    """Answers each request with ``CREATED`` (201), then: ``keep`` the connection,
    ``close`` it after the answer (no ``Connection: close`` said: a keep-alive that ran
    out), ``say_close`` (the answer says ``Connection: close``), ``slow``: answer after a
    second, ``too_large``: answer 413 before reading the body and close, ``silent``:
    read the request and never answer, or ``hang_up``: read it and close unanswered (a
    node that died with the request taken)."""

    def __init__(self, mode: str = "keep") -> None:
        self.mode = mode
        self.connections = 0
        self.requests: list[bytes] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            self._open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # the client went away, or stop() ended it
            self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
            head, buf = buf.split(b"\r\n\r\n", 1)
            if self.mode == "too_large":  # answers before the body, and closes unread
                self.requests.append(head)
                conn.sendall(
                    b"HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
                )
                time.sleep(0.2)
                return
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            while len(buf) < length:
                buf += conn.recv(65536)
            self.requests.append(head + b"\r\n\r\n" + buf[:length])
            buf = buf[length:]
            if self.mode == "silent":
                time.sleep(5)
                return
            if self.mode == "hang_up":
                return
            if self.mode == "slow":
                time.sleep(1)
            extra = b"Connection: close\r\n" if self.mode == "say_close" else b""
            extra += b"X-Via: caf\xe9\r\n"  # latin-1 past ASCII, as a proxy may add
            conn.sendall(
                b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                + extra
                + f"Content-Length: {len(CREATED)}\r\n\r\n".encode()
                + CREATED
            )
            if self.mode in ("close", "say_close"):
                conn.shutdown(socket.SHUT_RDWR)
                return

    def stop(self) -> None:
        self._sock.close()
        for c in self._open:  # each is closed by its own thread, once this ends its wait
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def node():
    n = Node()
    yield n
    n.stop()


def test_one_connection_is_kept_alive_across_calls(node):
    with Client([node.url], "token", retry_s=0) as c:
        for _ in range(5):
            c.produce("t", b"x", deliver_after=1000)
    assert (node.connections, len(node.requests)) == (1, 5)
    first = node.requests[0]
    assert first.startswith(b"POST /v1/messages HTTP/1.1\r\n")
    assert b"Authorization: Bearer token\r\n" in first
    assert b"Content-Type: application/msgpack\r\n" in first


def test_a_connection_the_node_closed_while_idle_is_not_sent_a_request(node):
    node.mode = "close"
    with Client([node.url], "token", retry_s=0) as c:
        for _ in range(3):
            c.produce("t", b"x", deliver_after=1000)
            time.sleep(0.05)  # the node's close arrives before the next call
    assert (node.connections, len(node.requests)) == (3, 3)


def test_an_answer_that_says_close_ends_its_connection(node):
    node.mode = "say_close"
    http = StdlibBlocking(5.0, True)
    for _ in range(3):
        assert http.send(http.build("GET", node.url + "/x")).status == 201
    assert node.connections == 3
    http.close()


def test_no_answer_in_time_is_a_read_timeout_and_a_call_not_to_be_resent_is_not(node):
    node.mode = "silent"
    http = StdlibBlocking(0.3, True)
    with pytest.raises(httpx.ReadTimeout):
        http.send(http.build("POST", node.url + "/v1/messages", content=b"{}"))
    with Client([node.url], "token", timeout=0.3, retry_s=5) as c, pytest.raises(UnavailableError) as e:
        c.request("POST", "/v1/messages/nack", {"receipts": []}, resend=False)
    assert "may or may not have applied" in str(e.value)
    assert len(node.requests) == 2  # sent once, not again


def test_a_node_that_hung_up_on_a_request_may_have_applied_it_and_a_call_not_to_be_resent_is_not(node):
    node.mode = "hang_up"
    with Client([node.url], "token", retry_s=5) as c, pytest.raises(UnavailableError) as e:
        c.request("POST", "/v1/topics/t/nack", {"group": "g", "receipts": []}, resend=False)
    assert "may or may not have applied" in str(e.value)
    assert len(node.requests) == 1  # sent once, not again
    with Client([node.url], "token", retry_s=0.5) as c, pytest.raises(UnavailableError):
        c.request("POST", "/v1/topics/t/ack", {"group": "g", "receipts": []})
    assert len(node.requests) > 2  # a call that may be resent is


def test_a_node_not_listening_is_passed_over_for_the_next(node):
    gone = Node()
    gone.stop()
    with Client([gone.url, node.url], "token", retry_s=0) as c:
        assert c.produce("t", b"x", deliver_after=1000).id
    with RawClient() as raw, pytest.raises(UnavailableError):
        raw.get(gone.url + "/healthz")


def test_a_per_call_timeout_overrides_the_clients(node):
    node.mode = "slow"
    with RawClient(timeout=30.0) as raw:
        with pytest.raises(UnavailableError, match="timed out"):
            raw.get(node.url + "/healthz", timeout=0.2)
        assert raw.get(node.url + "/healthz").status == 201


def test_a_url_is_sent_percent_encoded_as_httpx_sends_it(node):
    url = node.url + '/v1/forë cast`{}?topic=bad topic&x=ü%zz%41&y="<`{|}>"'
    with RawClient() as raw:
        assert raw.get(url).status == 201
    sent = node.requests[0].split(b"\r\n", 1)[0].split(b" ")[1]
    assert sent == httpx.Request("GET", url).url.raw_path
    assert sent == b"/v1/for%C3%AB%20cast%60%7B%7D?topic=bad%20topic&x=%C3%BC%zz%41&y=%22%3C`{|}%3E%22"


def test_a_header_past_ascii_is_kept_and_a_method_goes_in_capitals(node):
    with RawClient() as raw:
        reply = raw.request("delete", node.url + "/v1/messages/x")
    assert reply.status == 201 and reply.headers["x-via"] == "café"
    assert node.requests[0].startswith(b"DELETE /v1/messages/x HTTP/1.1\r\n")


def test_a_closed_client_refuses_to_send(node):
    raw = RawClient()
    assert raw.get(node.url + "/x").status == 201
    raw.close()
    with pytest.raises(RuntimeError, match="closed"):
        raw.get(node.url + "/x")


def test_an_answer_given_before_the_body_was_taken_is_the_answer(node):
    """A node that refuses a body over its limit answers at once and closes; the write of
    the rest fails, and the 413 is what the caller gets (as from httpx), not a node that
    could not be reached."""
    node.mode = "too_large"
    with RawClient() as raw:
        assert raw.post(node.url + "/v1/messages/batch", content=b"x" * 50_000_000).status == 413
