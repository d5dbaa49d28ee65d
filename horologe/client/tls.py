"""How the clients check a node's certificate on ``https://`` URLs.

Certificates are always verified, host name included; no setting turns that off.
``ca`` names the CAs to trust (a PEM file, or a directory of them as ``openssl rehash``
leaves it) instead of the default bundle, which is httpx's: certifi's, or the one
``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` name. ``verify`` may instead be an
``ssl.SSLContext`` of the caller's own (a client certificate, a pinned CA), as long as
it verifies.
"""

from __future__ import annotations

import os
import ssl


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
        return True
    path = os.fspath(ca)
    try:
        if os.path.isdir(path):
            return ssl.create_default_context(capath=path)
        return ssl.create_default_context(cafile=path)
    except FileNotFoundError as e:
        raise ValueError(f"ca: no such file {path!r}") from e
    except (ssl.SSLError, OSError) as e:
        raise ValueError(f"ca: {path!r} holds no usable CA certificate: {e}") from e


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
