"""A node's own calls to peers over HTTPS (node/peer_readiness.py): verified against tls_ca."""

from __future__ import annotations

import ssl

import aiohttp
import pytest
from aiohttp import web

from horologe.node.clock import system_clock
from horologe.node.config import NodeConfig
from horologe.node.peer_readiness import peer_readiness
from horologe.node.service import NodeService
from horologe.node.tls import client_context, peer_context, server_context
from testkit.process_cluster import free_ports
from testkit.tls import make_pki


@pytest.fixture
async def https_peer(tmp_path):
    """A stand-in peer serving /readyz over HTTPS with n2's certificate; yields (url, pki)."""
    pki = make_pki(str(tmp_path / "tls"), ["n2"])

    async def readyz(request: web.Request) -> web.Response:
        return web.json_response({"ready": True, "leader": "n2"})

    app = web.Application()
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app)
    await runner.setup()
    (port,) = free_ports(1)
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=server_context(*pki.certs["n2"])).start()
    yield f"https://127.0.0.1:{port}", pki
    await runner.cleanup()


async def test_a_peer_is_read_over_https_when_its_ca_is_trusted(https_peer):
    url, pki = https_peer
    connector = aiohttp.TCPConnector(ssl=client_context(pki.ca))
    async with aiohttp.ClientSession(connector=connector) as session:
        assert await peer_readiness(session, url, 2.0) == {"ready": True, "leader": "n2"}


async def test_a_peer_whose_certificate_does_not_verify_is_no_answer(https_peer, tmp_path, caplog):
    url, _ = https_peer
    stranger = make_pki(str(tmp_path / "other"), [])  # another CA: n2's certificate is not its
    for ctx in (client_context(stranger.ca), client_context(None)):  # and not the system's either
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
            assert await peer_readiness(session, url, 2.0) is None
    assert "TLS failed (is tls_ca the CA that signed its certificate?)" in caplog.text
    # plain HTTP to a TLS port is no answer either, never a downgrade
    async with aiohttp.ClientSession() as session:
        assert await peer_readiness(session, url.replace("https", "http"), 2.0) is None


async def test_with_no_tls_ca_a_peer_is_verified_against_the_system_s_cas(https_peer):
    url, _ = https_peer
    connector = aiohttp.TCPConnector(ssl=peer_context(None))
    async with aiohttp.ClientSession(connector=connector) as session:
        assert await peer_readiness(session, url, 2.0) is None  # n2's CA is not the system's


def test_a_node_with_no_tls_ca_loads_no_cas_as_it_starts(tmp_path, monkeypatch):
    """aiohttp made its verifying context as it was imported; another loads the system's
    CAs again, ~45 ms of CPU at each start of a node."""

    def loaded(*args, **kwargs):
        raise AssertionError("a context loaded the system's CAs")

    monkeypatch.setattr(ssl, "create_default_context", loaded)
    config = NodeConfig(node_id="n1", data_dir=str(tmp_path), http="127.0.0.1:1", raft="127.0.0.1:2")
    svc = NodeService(config, system_clock(0))
    svc.view.close()
    svc._writer.store.close()
    assert svc.peer_ssl is True  # aiohttp's own: the system's CAs, the host name checked
