"""The toxiproxy stand-in, driven by the real toxiproxy-python client."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time

import pytest
from toxiproxy import Toxiproxy
from toxiproxy.exceptions import NotFound, ProxyExists

from testkit.process_cluster import free_ports

from .toxiproxy_server import STANDIN


@pytest.fixture(scope="module")
def echo_port():
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield port
    srv.close()


def _echo(conn: socket.socket) -> None:
    with conn:
        try:
            while data := conn.recv(65536):
                conn.sendall(data)
        except ConnectionError:
            pass  # the proxy reset or closed the link on purpose


@pytest.fixture
def proxy(server, echo_port):
    server.reset()
    p = server.create(upstream=f"127.0.0.1:{echo_port}", name="echo")
    yield p
    server.destroy(p)


def roundtrip(proxy, payload: bytes = b"ping", timeout: float = 2.0) -> bytes:
    host, port = proxy.listen.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def test_proxies_forward_and_are_listed(server, proxy):
    assert roundtrip(proxy) == b"ping"
    assert set(server.proxies()) == {"echo"} and server.version().startswith(b"2.")
    with pytest.raises(ProxyExists):
        server.create(upstream=proxy.upstream, name="echo")


def test_latency_adds_at_least_its_delay(proxy):
    proxy.add_toxic(type="latency", attributes={"latency": 300, "jitter": 0})
    t0 = time.monotonic()
    assert roundtrip(proxy) == b"ping"
    assert time.monotonic() - t0 >= 0.3
    assert set(proxy.toxics()) == {"latency_downstream"}


def test_timeout_drops_data_and_its_removal_closes_the_link(proxy):
    proxy.add_toxic(type="timeout", stream="upstream", attributes={"timeout": 0})
    host, port = proxy.listen.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=0.5) as s:
        s.sendall(b"lost")
        with pytest.raises(TimeoutError):
            s.recv(100)
        proxy.destroy_toxic("timeout_upstream")
        assert s.recv(100) == b""  # closed, and "lost" never reached the server
    assert roundtrip(proxy) == b"ping"


def test_latency_delays_each_chunk_from_its_arrival(proxy):
    """Latency is a delay, not a rate: chunks sent back to back are not queued behind each other."""
    proxy.add_toxic(type="latency", attributes={"latency": 400, "jitter": 0})
    host, port = proxy.listen.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        t0 = time.monotonic()
        for k in range(5):
            s.sendall(b"%d" % k)
            time.sleep(0.05)
        got = b""
        while len(got) < 5:
            got += s.recv(100)
        took = time.monotonic() - t0
    assert got == b"01234"
    assert 0.4 <= took < 5 * 0.4  # 5 queued delays would take 2 s


def test_timeout_with_a_limit_closes_the_connection(proxy):
    proxy.add_toxic(type="timeout", attributes={"timeout": 200})
    assert roundtrip(proxy, timeout=3) == b""  # closed, nothing echoed


def test_reset_peer_resets(proxy):
    proxy.add_toxic(type="reset_peer", stream="upstream", attributes={"timeout": 0})
    with pytest.raises(ConnectionResetError):
        roundtrip(proxy)
        roundtrip(proxy)  # a reset can surface on the next read


def test_limit_data_closes_after_the_limit(proxy):
    proxy.add_toxic(type="limit_data", attributes={"bytes": 10})
    assert roundtrip(proxy, b"x" * 100) == b"x" * 10


def test_bandwidth_slows_transfer(proxy):
    proxy.add_toxic(type="bandwidth", attributes={"rate": 100})  # KB/s
    t0 = time.monotonic()
    assert roundtrip(proxy, b"y" * 60_000) == b"y" * 60_000
    assert time.monotonic() - t0 >= 60_000 / (100 * 1024) * 0.9


def test_disable_refuses_connections_and_reset_restores(server, proxy):
    with proxy.down():
        with pytest.raises(OSError):
            roundtrip(proxy)
    assert roundtrip(proxy) == b"ping"
    proxy.add_toxic(type="latency", attributes={"latency": 100})
    proxy.disable()
    server.reset()
    assert server.get_proxy("echo").enabled and server.get_proxy("echo").toxics() == {}
    assert roundtrip(proxy) == b"ping"


def test_unknown_toxic_and_proxy(server, proxy):
    with pytest.raises(NotFound):
        proxy.destroy_toxic("nope")
    assert server.get_proxy("missing") is None


def _start_standin(tmp_path, proxies: list[dict]) -> tuple[subprocess.Popen, Toxiproxy]:
    (config := tmp_path / "proxies.json").write_text(json.dumps(proxies))
    (api,) = free_ports(1)
    proc = subprocess.Popen(
        [sys.executable, STANDIN, "--port", str(api), "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    client = Toxiproxy()
    client.update_api_consumer("127.0.0.1", api)
    return proc, client


def test_config_file_proxies_exist_at_start(tmp_path, echo_port):
    """As toxiproxy's -config: docker-compose's proxy service is given its proxies so."""
    (listen,) = free_ports(1)
    spec = {"name": "echo_cfg", "listen": f"127.0.0.1:{listen}", "upstream": f"127.0.0.1:{echo_port}"}
    proc, client = _start_standin(tmp_path, [{**spec, "enabled": True}])
    try:
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                proxies = client.proxies()
                break
            except Exception:  # noqa: BLE001 - not listening yet
                time.sleep(0.05)
        assert proc.poll() is None, proc.stdout.read()
        assert list(proxies) == ["echo_cfg"] and proxies["echo_cfg"].listen == spec["listen"]
        assert roundtrip(proxies["echo_cfg"]) == b"ping"
    finally:
        proc.terminate()
        proc.wait(5)


def test_a_config_proxy_that_cannot_listen_stops_the_server(tmp_path, echo_port):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        spec = {"name": "clash", "listen": f"127.0.0.1:{taken.getsockname()[1]}", "upstream": "127.0.0.1:1"}
        proc, _ = _start_standin(tmp_path, [spec])
        out, _ = proc.communicate(timeout=10)
    assert proc.returncode != 0 and "config proxy 'clash'" in out
