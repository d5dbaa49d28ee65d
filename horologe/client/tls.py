"""How the clients check a node's certificate on ``https://`` URLs.

Certificates are always verified, host name included; no setting turns that off.
``ca`` names the CAs to trust (a PEM file, or a directory of them as ``openssl rehash``
leaves it) instead of the default bundle, which is httpx's: certifi's, or the one
``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` name. ``verify`` may instead be an
``ssl.SSLContext`` of the caller's own (a client certificate, a pinned CA), as long as
it verifies.

The default bundle is loaded once per process (per ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``)
and its context shared by every client: loading it took about 20 ms of CPU, which each
client paid when it was made, ``http://`` URLs included (httpx makes its context then).
"""

from __future__ import annotations

import functools
import os
import ssl

import httpx


def verify_setting(ca: str | os.PathLike | None, verify: bool | ssl.SSLContext) -> bool | ssl.SSLContext:
    """What to hand httpx as ``verify``; raises ValueError for a setting that would not verify."""
    if verify is False:
        raise ValueError(
            "certificate verification cannot be turned off; give ca= the CA that signed the nodes' "
            "certificates"
        )
    if isinstance(verify, ssl.SSLContext):
        if ca is not None:
            raise ValueError("give ca= or an ssl.SSLContext as verify=, not both")
        if verify.verify_mode != ssl.CERT_REQUIRED or not verify.check_hostname:
            raise ValueError("verify= must be an ssl.SSLContext that verifies certificates and host names")
        return verify
    if verify is not True:
        raise ValueError(f"verify is True or an ssl.SSLContext; got {verify!r}")
    if ca is None:
        return _default_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    path = os.fspath(ca)
    try:
        if os.path.isdir(path):
            return ssl.create_default_context(capath=path)
        return ssl.create_default_context(cafile=path)
    except FileNotFoundError as e:
        raise ValueError(f"ca: no such file {path!r}") from e
    except (ssl.SSLError, OSError) as e:
        raise ValueError(f"ca: {path!r} holds no usable CA certificate: {e}") from e


@functools.cache
def _default_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """httpx's context for ``verify=True`` (it reads the two variables, named here so that
    a change of either makes a new one)."""
    return httpx.create_ssl_context()


def certificate_failure(error: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate check that failed behind an httpx error, if that is what it was.

    Worth no retry: every node of a cluster is signed alike, and a certificate that does
    not verify now will not verify a moment later.
    """
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
