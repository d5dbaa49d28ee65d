"""Checking a push's ``Horologe-Signature`` on the receiving side (docs/api.md, "Push
subscriptions").

The header is ``t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>``. A
receiver passes the raw bytes it received (before any JSON parsing: a re-encoded body
would not match) and its secret::

    from horologe.client import verify_signature

    if not verify_signature(SECRET, request.headers["Horologe-Signature"], raw_body):
        return 401
"""

from __future__ import annotations

import hashlib
import hmac
import time

DEFAULT_TOLERANCE_S = 300


def verify_signature(
    secret: str | bytes,
    header: str | None,
    body: bytes | str,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    *,
    now_s: float | None = None,
) -> bool:
    """True when ``header`` signs ``body`` with ``secret`` at a ``t`` within ``tolerance_s``
    of ``now_s`` (default: this machine's clock), else False: a missing or malformed header,
    a stale or future ``t`` (a replay), or no ``v1`` MAC that matches. MACs are compared in
    constant time. Several ``v1`` values may be given; one match is enough."""
    if not header:
        return False
    t_text, macs = None, []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t":
            t_text = value
        elif name == "v1":
            macs.append(value)
    # ASCII digits (isdigit() takes "²", which int() refuses), few enough for int() to read
    if t_text is None or not (t_text.isascii() and t_text.isdigit() and len(t_text) <= 20) or not macs:
        return False
    now = time.time() if now_s is None else now_s
    if abs(now - int(t_text)) > tolerance_s:
        return False
    key = secret.encode() if isinstance(secret, str) else secret
    raw = body.encode() if isinstance(body, str) else body
    want = hmac.new(key, t_text.encode() + b"." + raw, hashlib.sha256).hexdigest()
    # Every candidate is compared (no early exit), each in constant time, as bytes: a
    # string of other than ASCII makes compare_digest raise.
    expected = want.encode()
    return sum(hmac.compare_digest(expected, mac.encode("utf-8", "surrogatepass")) for mac in macs) > 0
