"""A pull's request timeout covers its long poll: the client's ``timeout`` is on top of
``wait_ms`` (horologe/client/core.py, ``pull_timeout``).

Before, a pull waiting longer than the client's timeout (``pull(wait_ms=12_000)`` with the
default 10 s) timed out on every node it asked, was sent again until ``retry_s`` ran out,
and raised ``UnavailableError`` ("3 redirects in a row; no agreed master yet") after 40 s,
where the node would have answered an empty batch after 12 s.
"""

from __future__ import annotations

import asyncio
import http.server
import threading
import time

import pytest

from horologe.client import AsyncClient, Client
from testkit.stand_in import answer_json, read_body

TIMEOUT_S = 0.3
WAIT_MS = 700  # longer than the client's timeout


class _LongPoll(http.server.BaseHTTPRequestHandler):
    """Answers a pull as a master with nothing ready does: an empty batch after ``wait_ms``."""

    protocol_version = "HTTP/1.1"
    pulls: list[float] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = read_body(self)
        self.pulls.append(time.monotonic())
        time.sleep(body["wait_ms"] / 1000)
        answer_json(self, 200, {"messages": [], "clock_ms": 1})

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def node():
    _LongPoll.pulls = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _LongPoll)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_pull_that_waits_longer_than_the_client_timeout_gets_its_answer(node):
    with Client([node], token="t", timeout=TIMEOUT_S, retry_s=1.0) as client:
        started = time.monotonic()
        assert client.pull("t", "g", wait_ms=WAIT_MS) == []
    assert len(_LongPoll.pulls) == 1  # sent once, answered once
    assert time.monotonic() - started >= WAIT_MS / 1000


def test_an_async_pull_that_waits_longer_than_the_client_timeout_gets_its_answer(node):
    async def pull() -> list:
        async with AsyncClient([node], token="t", timeout=TIMEOUT_S, retry_s=1.0) as client:
            return await client.pull("t", "g", wait_ms=WAIT_MS)

    assert asyncio.run(pull()) == []
    assert len(_LongPoll.pulls) == 1
