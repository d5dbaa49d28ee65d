"""How a push is signed (DESIGN §6, Push subscriptions; docs/api.md, "Push subscriptions").

``Horologe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>``:
the receiver recomputes the MAC over the exact bytes it received, compares it in constant
time, and refuses a ``t`` too far from its own clock, so a captured request cannot be
replayed later (horologe.client.verify_signature does both).
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "Horologe-Signature"
MESSAGE_ID_HEADER = "Horologe-Message-Id"
ATTEMPT_HEADER = "Horologe-Attempt"
DELIVERIES_HEADER = "Horologe-Deliveries"


def signature(secret: str, t: int, body: bytes) -> str:
    """The ``Horologe-Signature`` value of ``body`` sent at unix second ``t``."""
    mac = hmac.new(secret.encode(), b"%d." % t + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"
