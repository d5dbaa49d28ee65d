"""TLS for the HTTP API: the context a node serves with, and the one it calls peers with.

``tls_cert`` and ``tls_key`` (PEM files) make a node serve HTTPS; ``tls_ca`` (a PEM file
of CA certificates) is what the node trusts when it calls a peer's HTTP API, instead of
the system's CAs. A peer's certificate is always verified, host name included: there is
no switch to turn that off.
"""

from __future__ import annotations

import os
import ssl

from .errors import ConfigError


def check_readable(path: str, key: str) -> None:
    """Refuse a TLS file that is missing, not a file, or unreadable, naming its config key."""
    if not os.path.isfile(path):
        raise ConfigError(f"{key}: no such file {path!r}")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as e:
        raise ConfigError(f"{key}: cannot read {path!r}: {e.strerror or e}") from e


def server_context(cert: str, key: str) -> ssl.SSLContext:
    """The context to serve HTTPS with: TLS 1.2 or later, the certificate chain in ``cert``."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, ValueError) as e:
        raise ConfigError(f"tls_cert/tls_key: cannot use {cert!r} with {key!r}: {e}") from e
    return ctx


def peer_context(ca: str | None) -> ssl.SSLContext | bool:
    """What a node calls its peers with (aiohttp's ``ssl=``): :func:`client_context` of
    ``ca``; with none, ``True``: aiohttp's own verifying context, made from the system's
    CAs as aiohttp was imported (another would load them again, ~45 ms of CPU a start)."""
    return client_context(ca) if ca else True


def client_context(ca: str | None) -> ssl.SSLContext:
    """The context to call peers with: verifies their certificate and host name, against
    ``ca`` when given, else the system's CAs."""
    try:
        ctx = ssl.create_default_context(cafile=ca)
    except (ssl.SSLError, ValueError) as e:
        raise ConfigError(f"tls_ca: {ca!r} holds no usable CA certificate: {e}") from e
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx
