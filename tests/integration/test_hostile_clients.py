"""Clients that hold connections without finishing a request, or send oversized request
heads: the node closes them and goes on serving everybody else."""

from __future__ import annotations

import json
import socket
import threading
import time

from testkit.process_cluster import ADMIN, CLIENT, ENV

IDLE_MS = 1000


def _open(host: str, port: int, n: int) -> list[socket.socket]:
    return [socket.create_connection((host, port), timeout=5) for _ in range(n)]


def _closed_by_peer(s: socket.socket) -> bool:
    """True once the node closed its end: EOF or a reset; False while it is still open."""
    s.setblocking(False)
    try:
        return s.recv(1 << 16) == b"" or _closed_by_peer(s)
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_slow_and_idle_connections_are_closed_and_others_are_served(make_cluster):
    cluster = make_cluster(extra_toml=f"http_idle_timeout_ms = {IDLE_MS}")
    master = cluster.wait_leader()
    host, port = cluster.url(master).split("//")[1].split(":")
    idle = _open(host, int(port), 150)  # connect and say nothing
    slow = _open(host, int(port), 150)  # a slowloris: a header line every 200 ms, never the end
    for s in slow:
        s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: n\r\n")
    stop = threading.Event()

    def drip() -> None:
        while not stop.is_set():
            for s in slow:
                try:
                    s.sendall(b"X-Drip: 1\r\n")
                except OSError:
                    pass  # closed by the node, as it should be
            stop.wait(0.2)

    dripper = threading.Thread(target=drip)
    dripper.start()
    try:
        client = cluster.client(master)
        ids = [client.produce("t", b"x", deliver_after="1h") for _ in range(50)]
        assert len(set(ids)) == 50  # served while 300 connections hang on
        time.sleep(IDLE_MS / 1000 * 2.5)
        still_open = [s for s in idle + slow if not _closed_by_peer(s)]
        assert still_open == []
    finally:
        stop.set()
        dripper.join()
        for s in idle + slow:
            s.close()
    assert len([client.produce("t", b"x", deliver_after="1h") for _ in range(5)]) == 5


def _status_of(host: str, port: int, head: bytes) -> int:
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(head)
        answer = s.recv(1 << 16)
    return int(answer.split(b" ", 2)[1])


def test_oversized_request_heads_are_refused(cluster):
    master = cluster.wait_leader()
    host, port = cluster.url(master).split("//")[1].split(":")
    long_query = b"GET /readyz?" + b"q" * 10_000 + b" HTTP/1.1\r\nHost: n\r\n\r\n"
    long_field = b"GET /readyz HTTP/1.1\r\nHost: n\r\nX-Big: " + b"v" * 10_000 + b"\r\n\r\n"
    many = b"GET /readyz HTTP/1.1\r\nHost: n\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(200)) + b"\r\n"
    assert [_status_of(host, int(port), head) for head in (long_query, long_field, many)] == [400, 400, 400]
    assert _status_of(host, int(port), b"GET /readyz HTTP/1.1\r\nHost: n\r\n\r\n") == 200


def test_tokens_and_the_secret_appear_in_no_answer_and_no_log(cluster):
    master = cluster.wait_leader()
    url = cluster.url(master)
    wrong = "wrong-token-" + "z" * 20
    answers = [
        cluster.http.post(f"{url}/v1/messages", {"topic": "t", "body": "x"}),
        cluster.http.post(f"{url}/v1/messages", {"topic": "t", "body": "x"}, token=wrong),
        cluster.http.post(f"{url}/admin/release-master", content=b"{}", token=CLIENT),
        cluster.http.get(f"{url}/admin/status", token=CLIENT),
        cluster.to_master("POST", "/v1/messages", {"topic": "t", "body": "x", "key": ""}, token=CLIENT),
    ]
    assert [a.status for a in answers] == [401, 403, 403, 403, 400]
    cluster.client(master).produce("t", b"x", deliver_after="1h")
    cluster.client(master).release_master()
    cluster.wait_leader()
    said = [json.dumps(a.body) for a in answers] + [cluster.log(i) for i in cluster.indexes]
    for secret in (CLIENT, ADMIN, ENV["HOROLOGE_CLUSTER_SECRET"], wrong):
        assert [s for s in said if secret in s] == []
