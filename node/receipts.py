"""Receipts: what a pull hands out with each message, and the only way to ack or nack it.

Format (opaque to clients)::

    <offset>.<lease_until_ms>.<mac>.<topic>

``mac`` is the first 16 bytes, in hex, of HMAC-SHA256(key, group NUL topic NUL offset NUL
lease_until_ms), and ``key`` is HMAC-SHA256(cluster secret, "horologe receipts v1"). Every
node derives the same key, so a receipt handed out by one master is good on the next.
A receipt names one hand-out of one ready entry to one group: a client cannot make one for
an offset not yet delivered, for another topic, or for another group. Before, a forged
``<offset>.1.<topic>`` acked messages before they arrived, and the group never got them.
"""

from __future__ import annotations

import hmac

from .errors import ApiError

MAC_BYTES = 16
MAX_OFFSET = (1 << 63) - 1  # what an ack entry can carry


class Receipts:
    def __init__(self, cluster_secret: str | None) -> None:
        # Without a secret (--insecure-dev only) the key is public, as everything else is there.
        self._key = hmac.digest((cluster_secret or "").encode(), b"horologe receipts v1", "sha256")

    def _mac(self, group: str, topic: str, offset: int, lease_until_ms: int) -> str:
        msg = f"{group}\0{topic}\0{offset}\0{lease_until_ms}".encode()
        return hmac.digest(self._key, msg, "sha256")[:MAC_BYTES].hex()

    def issue(self, group: str, topic: str, offset: int, lease_until_ms: int) -> str:
        return f"{offset}.{lease_until_ms}.{self._mac(group, topic, offset, lease_until_ms)}.{topic}"

    def open(self, group: str, receipt) -> tuple[str, int]:
        """(topic, offset) of a receipt this cluster issued to ``group``; 400 for anything else."""
        try:
            offset_s, lease_s, mac, topic = receipt.split(".", 3)
            offset, lease = int(offset_s), int(lease_s)
        except (AttributeError, ValueError):
            raise _invalid(receipt, "malformed") from None
        if not 0 <= offset <= MAX_OFFSET or not hmac.compare_digest(
            mac, self._mac(group, topic, offset, lease)
        ):
            raise _invalid(receipt, f"not a receipt this cluster handed to group {group!r}")
        return topic, offset


def _invalid(receipt, why: str) -> ApiError:
    shown = receipt if isinstance(receipt, str) and len(receipt) <= 200 else type(receipt).__name__
    return ApiError(400, "invalid_receipt", f"{why}: {shown!r}", "receipts")
