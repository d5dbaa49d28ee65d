"""A flood of connections cannot take the node's file descriptors: past
``http_max_connections`` a new connection is answered 503 at once and closed, while the
connections already open, the store and the Raft links go on working."""

from __future__ import annotations

import resource
import socket
import ssl
import threading
import time

import pytest

from horologe.client import Client
from horologe.node.http.server import LINGER_S, MAX_LINGERING
from testkit.process_cluster import CLIENT

BOUND = 200
FDS = 600  # the node's descriptor limit in this test: fewer than the flood's sockets
FLOOD = 700
HOUR_MS = 3_600_000


REQUEST = b"GET /healthz HTTP/1.1\r\nHost: n\r\n\r\n"
BUSY = b"HTTP/1.1 503 Service Unavailable"


def _first_line(s: socket.socket, ask: bool, wait_s: float = 0.5) -> bytes:
    """The first line the node sends on ``s`` (after a request, if ``ask``): b"" if it
    closed or reset the connection, or said nothing in ``wait_s``."""
    s.settimeout(wait_s)
    try:
        if ask:
            s.sendall(REQUEST)
        return s.recv(1 << 12).split(b"\r\n", 1)[0]
    except (TimeoutError, ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return b""


def _connect(host: str, port: int, tls: ssl.SSLContext | None) -> socket.socket:
    s = socket.create_connection((host, port), timeout=5)
    return tls.wrap_socket(s) if tls else s


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_a_connection_flood_is_answered_503_and_the_node_keeps_working(make_cluster, tls):
    """Over TLS a connection counts from its accept, before its handshake is done."""
    cluster = make_cluster(extra_toml=f"http_max_connections = {BOUND}", tls=tls)
    master = cluster.wait_connected()
    context = None
    if tls:
        context = ssl.create_default_context(cafile=cluster.ca)
        context.check_hostname = False
    resource.prlimit(cluster.procs[master].pid, resource.RLIMIT_NOFILE, (FDS, FDS))
    term = cluster.status(master)["term"]
    host, port = cluster.url(master).split("//")[1].split(":")
    # A client whose kept-alive connection was open before the flood, and stays in use
    # (httpx drops a connection idle for 5 s), one produce every 0.2 s.
    client = Client([cluster.url(master)], CLIENT, timeout=10, retry_s=0, ca=cluster.ca)
    produced: list[str] = []
    failed: list[Exception] = []
    stop = threading.Event()
    one_at_a_time = threading.Lock()

    def keep_using() -> None:
        while not stop.wait(0.2):
            try:
                with one_at_a_time:  # one connection: a second would be past the bound
                    produced.append(client.produce("during", b"x", deliver_after="1h").id)
            except Exception as e:  # noqa: BLE001 - reported by the test below
                failed.append(e)

    client.produce("before", b"x", deliver_after="1h")
    user = threading.Thread(target=keep_using)
    user.start()
    flood = []
    try:
        for _ in range(FLOOD):
            flood.append(_connect(host, int(port), context))
        # Past the bound, the node says 503 unasked, or resets the connection once more
        # than MAX_LINGERING refused ones wait to be read; it serves none of them. (The
        # test's own clients hold a connection or two, and so take a few of those 503s.)
        # A connection still in the listen backlog when its first line was awaited (the
        # node's accept pauses a second on EMFILE) is accepted later: its 503 comes then.
        told = [_first_line(s, ask=False) for s in flood[BOUND:]]
        assert told[: MAX_LINGERING // 2] == [BUSY] * (MAX_LINGERING // 2), told[:3]
        asked = [_first_line(s, ask=True) for s, a in zip(flood[BOUND:], told, strict=True) if a != BUSY]
        assert set(asked) <= {b"", BUSY}, [a for a in asked if a not in (b"", BUSY)][:3]
        # Once the refused ones have been let go, a client past the bound that asks at once
        # reads its 503 (closing on its unread request would have sent a reset instead).
        time.sleep(LINGER_S * 1.5)
        with _connect(host, int(port), context) as late:
            assert _first_line(late, ask=True, wait_s=5) == BUSY

        # The store opens new files meanwhile: one message in each of 24 new hours.
        far = int(time.time() * 1000) + 10 * 24 * HOUR_MS
        with one_at_a_time:
            ids = [client.produce("flood", b"y", deliver_at=far + h * HOUR_MS).id for h in range(24)]
        assert len(set(ids)) == 24
    finally:
        stop.set()
        user.join()
        for s in flood:
            s.close()
    client.close()
    assert failed == [] and produced
    st = cluster.status(master)
    assert not st["halted"], st["halted"]
    assert st["term"] == term and cluster.wait_leader() == master
    after = cluster.client(master, retry_s=5)  # a new connection, now that the flood is gone
    assert after.produce("after", b"z", deliver_after="1h")
