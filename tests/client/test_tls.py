"""The SDK and RawClient over HTTPS: certificates always verified, against ``ca=`` when given.

A real TLS server in a thread (http.server), with a CA and certificates made here: the
checks are OpenSSL's, not a mock's.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import ssl
import threading
import time

import pytest

from horologe.client import AsyncClient, CertificateError, Client, RawClient
from testkit.stand_in import answer_json, read_body
from testkit.tls import make_pki

TOKEN = "tok"


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.server.requests += 1
        body = read_body(self)
        answer_json(self, 201, {"id": "m1", "topic": body["topic"], "deliver_at": 5})

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def pki(tmp_path):
    return make_pki(str(tmp_path / "tls"), ["node"])


@contextlib.contextmanager
def serving(cert: str, key: str):
    """A node stand-in on https://127.0.0.1:<port>; counts the requests that got through."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.requests = 0
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def https_node(pki):
    """With a certificate for 127.0.0.1 and localhost, signed by ``pki``'s CA."""
    with serving(*pki.certs["node"]) as server:
        yield server


def _url(server, host: str = "127.0.0.1") -> str:
    return f"https://{host}:{server.server_address[1]}"


def test_with_the_ca_every_client_talks_https(https_node, pki):
    with Client([_url(https_node)], TOKEN, ca=pki.ca) as c:
        assert c.produce("t", "x").id == "m1"
    with RawClient(ca=pki.ca) as raw:
        assert raw.post(f"{_url(https_node)}/v1/messages", {"topic": "t"}).status == 201
    verifying = ssl.create_default_context(cafile=pki.ca)  # a context of one's own, verifying
    with Client([_url(https_node, "localhost")], TOKEN, verify=verifying) as c:
        assert c.produce("t", "x").id == "m1"
    assert https_node.requests == 3


async def test_the_async_client_talks_https_with_the_ca(https_node, pki):
    async with AsyncClient([_url(https_node)], TOKEN, ca=pki.ca) as c:
        assert (await c.produce("t", "x")).id == "m1"


def test_without_the_ca_the_node_is_refused_at_once_and_nothing_is_sent(https_node):
    t0 = time.monotonic()
    with Client([_url(https_node)], TOKEN, retry_s=30) as c, pytest.raises(CertificateError) as e:
        c.produce("t", "x")
    assert time.monotonic() - t0 < 10, "a certificate that does not verify is not retried for retry_s"
    assert "did not verify (unable to get local issuer certificate)" in str(e.value)
    with RawClient() as raw, pytest.raises(CertificateError):
        raw.post(f"{_url(https_node)}/v1/messages", {"topic": "t"})
    assert https_node.requests == 0


async def test_without_the_ca_the_async_client_is_refused(https_node):
    async with AsyncClient([_url(https_node)], TOKEN, retry_s=30) as c:
        with pytest.raises(CertificateError):
            await c.produce("t", "x")
    assert https_node.requests == 0


def test_a_certificate_from_another_ca_is_refused(https_node, tmp_path):
    other = make_pki(str(tmp_path / "other"), [])
    with Client([_url(https_node)], TOKEN, ca=other.ca) as c, pytest.raises(CertificateError):
        c.produce("t", "x")
    assert https_node.requests == 0


def test_a_certificate_for_another_host_is_refused(tmp_path):
    """The right CA, but a certificate that names only localhost, reached as 127.0.0.1."""
    pki = make_pki(str(tmp_path / "one-host"), ["node"], hosts=["localhost"])
    with serving(*pki.certs["node"]) as server:
        with Client([_url(server, "localhost")], TOKEN, ca=pki.ca) as c:
            assert c.produce("t", "x").id == "m1"  # the name it was issued for
        with (
            Client([_url(server)], TOKEN, ca=pki.ca) as c,
            pytest.raises(CertificateError, match="127.0.0.1"),
        ):
            c.produce("t", "x")
        assert server.requests == 1


@pytest.mark.parametrize("make", [Client, RawClient])
def test_verification_cannot_be_turned_off(make, pki, tmp_path):
    def build(**tls):
        return make(["https://127.0.0.1:1"], TOKEN, **tls) if make is Client else make(**tls)

    with pytest.raises(ValueError, match="cannot be turned off"):
        build(verify=False)
    lax = ssl.create_default_context()
    lax.check_hostname = False
    with pytest.raises(ValueError, match="verifies certificates and host names"):
        build(verify=lax)
    lax.verify_mode = ssl.CERT_NONE
    with pytest.raises(ValueError, match="verifies certificates and host names"):
        build(verify=lax)
    with pytest.raises(ValueError, match="not both"):
        build(ca=pki.ca, verify=ssl.create_default_context())
    with pytest.raises(ValueError, match="ca: no such file"):
        build(ca=str(tmp_path / "missing.pem"))
    junk = tmp_path / "junk.pem"
    junk.write_text("no certificate here\n")
    with pytest.raises(ValueError, match="no usable CA certificate"):
        build(ca=str(junk))


def test_clients_share_the_default_bundle_loaded_once(monkeypatch):
    """Loading the default CA bundle cost each new client about 20 ms of CPU (httpx loads
    it when a client is made, for http:// URLs too); it is loaded once and shared."""
    Client(["http://127.0.0.1:1"], TOKEN).close()
    loads = []
    real = ssl.SSLContext.load_verify_locations

    def counted(self, *args, **kwargs):
        loads.append(args or kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    for _ in range(3):
        Client(["http://127.0.0.1:1"], TOKEN).close()
        RawClient().close()
    assert loads == []
    monkeypatch.setenv("SSL_CERT_FILE", ssl.get_default_verify_paths().openssl_cafile or "")
    if os.environ["SSL_CERT_FILE"] and os.path.exists(os.environ["SSL_CERT_FILE"]):
        Client(["http://127.0.0.1:1"], TOKEN).close()  # another bundle named: loaded anew
        assert len(loads) == 1
