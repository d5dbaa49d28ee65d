"""Receipts: what a pull hands out, and the only way to ack or nack what it leased.

Format (opaque to clients)::

    <span>.<lease_until_ms>.<mac>.<topic>

``span`` names positions in the ready log ``topic``: ``o``, or ``lo-hi`` (both included),
several joined by ``,``. A pull gives each message a receipt naming its own position,
and one receipt per ready log it read naming every position it handed out from there
(``batch_receipts``), so a consumer acks a whole batch in one short string. ``mac`` is the
first 16 bytes, in hex, of keyed BLAKE2b(key, group NUL topic NUL span NUL
lease_until_ms), and ``key`` is HMAC-SHA256(cluster secret, "horologe receipts v2"):
every node derives the same key, so a receipt handed out by one master is good on the
next. Receipts of v1 (HMAC-SHA256 over one offset) are refused after an upgrade; their
messages come back when their lease ends.

A receipt names positions handed to one group in one pull: a client cannot make one for
a position not yet delivered, for another topic, or for another group. Before, a forged
``<offset>.1.<topic>`` acked messages before they arrived, and the group never got them.
"""

from __future__ import annotations

import hashlib
import hmac

from horologe.cluster.consumer_groups import Range

from .errors import ApiError

MAC_BYTES = 16
MAX_OFFSET = (1 << 63) - 1  # what an ack entry can carry
PREFIXES_KEPT = 1024  # (group, topic) hashers kept; all are dropped past that


class Receipts:
    def __init__(self, cluster_secret: str | None) -> None:
        # Without a secret (--insecure-dev only) the key is public, as everything else is there.
        self._key = hmac.digest((cluster_secret or "").encode(), b"horologe receipts v2", "sha256")
        # Keyed hashers that have absorbed "group NUL topic NUL": a copy finishes a MAC at
        # half the cost of keying a new one, and a pull makes one per message.
        self._prefixes: dict[tuple[str, str], hashlib.blake2b] = {}

    def _prefix(self, group: str, topic: str) -> hashlib.blake2b:
        base = self._prefixes.get((group, topic))
        if base is None:
            if len(self._prefixes) >= PREFIXES_KEPT:
                self._prefixes.clear()
            base = hashlib.blake2b(key=self._key, digest_size=MAC_BYTES)
            base.update(f"{group}\0{topic}\0".encode())
            self._prefixes[(group, topic)] = base
        return base

    def _mac(self, group: str, topic: str, span: str, lease_until_ms: int) -> str:
        h = self._prefix(group, topic).copy()
        h.update(f"{span}\0{lease_until_ms}".encode())
        return h.hexdigest()

    def issue(self, group: str, topic: str, offset: int, lease_until_ms: int) -> str:
        """The receipt of one handed-out position."""
        return self.issue_each(group, topic, [offset], lease_until_ms)[0]

    def issue_each(self, group: str, topic: str, offsets: list[int], lease_until_ms: int) -> list[str]:
        """``issue`` of each of ``offsets`` (a pull's messages), the key's set-up shared."""
        base, tail, out = self._prefix(group, topic), f"\0{lease_until_ms}".encode(), []
        for offset in offsets:
            span = str(offset)
            h = base.copy()
            h.update(span.encode() + tail)
            out.append(f"{span}.{lease_until_ms}.{h.hexdigest()}.{topic}")
        return out

    def issue_ranges(self, group: str, topic: str, ranges: list[Range], lease_until_ms: int) -> str:
        """One receipt for every position of ``ranges`` (``(lo, hi)``, hi excluded)."""
        span = ",".join(str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}" for lo, hi in ranges)
        return f"{span}.{lease_until_ms}.{self._mac(group, topic, span, lease_until_ms)}.{topic}"

    def open(self, group: str, receipt) -> tuple[str, list[Range]]:
        """(topic, ranges) of a receipt this cluster issued to ``group``; 400 for anything else."""
        try:
            span, lease_s, mac, topic = receipt.split(".", 3)
            want = self._mac(group, topic, span, int(lease_s)).encode()
            good = hmac.compare_digest(mac.encode(), want)
        except (AttributeError, ValueError):  # UnicodeEncodeError too (a lone surrogate)
            raise _invalid(receipt, "malformed") from None
        if not good:
            raise _invalid(receipt, f"not a receipt this cluster handed to group {group!r}")
        ranges = []
        for part in span.split(","):  # made by issue*: well formed
            lo, _, hi = part.partition("-")
            ranges.append((int(lo), int(hi or lo) + 1))
        if not all(0 <= lo < hi <= MAX_OFFSET for lo, hi in ranges):
            raise _invalid(receipt, "position out of range")
        return topic, ranges


def _invalid(receipt, why: str) -> ApiError:
    shown = receipt if isinstance(receipt, str) and len(receipt) <= 200 else type(receipt).__name__
    return ApiError(400, "invalid_receipt", f"{why}: {shown!r}", "receipts")
