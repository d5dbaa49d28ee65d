"""Receipts: what a pull hands out, and the only way to ack or nack what it leased.

Format (opaque to clients)::

    <span>.<lease_until_ms>.<mac>.<topic>
    <o>@<span>.<lease_until_ms>.<mac>.<topic>

``span`` names positions in the ready log ``topic``: ``o``, or ``lo-hi`` (both included),
several joined by ``,``. A pull gives one receipt per ready log it read naming every
position it handed out from there (``batch_receipts``), so a consumer acks a whole batch
in one short string. Each message gets a receipt naming its own position: ``o@`` and the
batch's span, lease and topic, with a MAC over ``"@" + span`` (one per batch, shared by
its members: minting a member is string formatting). That MAC vouches for the span to
members only: a member with ``o@`` taken off is not a batch receipt, so a message's
receipt acks that message and nothing else. When the span has more than
``MEMBER_RANGES`` ranges, and would make every member long, each message gets a receipt
of its own, ``o`` with its own MAC. ``mac`` is the
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

import bisect
import hashlib
import hmac

from horologe.cluster.consumer_groups import Range, to_ranges

from ..errors import InvalidReceipt

MAC_BYTES = 16
MEMBER_RANGES = 8  # a batch of more ranges gives its messages receipts with their own MACs
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
        span = _span(ranges)
        return self._signed(group, topic, span, lease_until_ms, span)

    def _signed(self, group: str, topic: str, span: str, lease_until_ms: int, mac_over: str) -> str:
        """``span.lease.mac.topic``, the MAC over ``mac_over``: the span, or a member's ``"@" + span``."""
        return f"{span}.{lease_until_ms}.{self._mac(group, topic, mac_over, lease_until_ms)}.{topic}"

    def issue_batch(
        self, group: str, topic: str, offsets: list[int], lease_until_ms: int
    ) -> tuple[str, list[str]]:
        """The batch receipt of ``offsets``, and a receipt for each of them: a member of
        the batch, or one of its own when the batch has more than ``MEMBER_RANGES`` ranges."""
        ranges = to_ranges(offsets)
        span = _span(ranges)
        batch = self._signed(group, topic, span, lease_until_ms, span)
        if len(ranges) > MEMBER_RANGES:
            return batch, self.issue_each(group, topic, offsets, lease_until_ms)
        tail = "@" + self._signed(group, topic, span, lease_until_ms, "@" + span)
        return batch, [f"{o}{tail}" for o in offsets]

    def open_leases(
        self, group: str, receipts: list, readys: tuple[str, ...] | None = None
    ) -> list[tuple[str, list[Range], int]]:
        """What each receipt this cluster issued to ``group`` names: its ready log, its
        ranges and the lease its pull handed out (``lease_until_ms``: the token of
        cluster/leases.py); InvalidReceipt (400) for anything else. A batch that several
        members name is checked once. ``readys``: the ready logs they may name (those a
        pull of the topic the call is for reads); a receipt of another is refused."""
        checked: dict[
            tuple[bool, str], tuple[str, list[Range], int]
        ] = {}  # a span's receipt -> what it names
        out = []
        for receipt in receipts:
            member, batch = _member_of(receipt)
            key = (member is not None, batch)
            named = checked.get(key)
            if named is None:
                named = checked[key] = self._open_batch(group, batch, receipt, member is not None)
                if readys is not None and named[0] not in readys:
                    raise _invalid(receipt, f"handed out from {named[0]!r}, not by a pull of {readys[0]!r}")
            if member is not None:
                topic, ranges, lease = named
                if not _within(member, ranges):
                    raise _invalid(receipt, "position not in its batch")
                named = (topic, [(member, member + 1)], lease)
            out.append(named)
        return out

    def _open_batch(self, group: str, batch: str, receipt, member: bool) -> tuple[str, list[Range], int]:
        """What ``batch`` (``span.lease.mac.topic``) names, and its lease; ``member``: its MAC
        is a member's."""
        try:
            span, lease_s, mac, topic = batch.split(".", 3)
            want = self._mac(group, topic, "@" + span if member else span, int(lease_s)).encode()
            good = hmac.compare_digest(mac.encode(), want)
        except ValueError:  # UnicodeEncodeError too (a lone surrogate)
            raise _invalid(receipt, "malformed") from None
        if not good:
            raise _invalid(receipt, f"not a receipt this cluster handed to group {group!r}")
        ranges = []
        for part in span.split(","):  # made by issue*: well formed
            lo, _, hi = part.partition("-")
            ranges.append((int(lo), int(hi or lo) + 1))
        if not all(0 <= lo < hi <= MAX_OFFSET for lo, hi in ranges):
            raise _invalid(receipt, "position out of range")
        return topic, ranges, int(lease_s)


def _span(ranges: list[Range]) -> str:
    return ",".join(str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}" for lo, hi in ranges)


def _member_of(receipt) -> tuple[int | None, str]:
    """(the position a member receipt names, or None; the rest, ``span.lease.mac.topic``)."""
    if not isinstance(receipt, str):
        raise _invalid(receipt, "malformed")
    head, dot, rest = receipt.partition(".")  # a topic may hold "@": look before it
    member, at, span = head.partition("@")
    if not at:
        return None, receipt
    if not (member.isascii() and member.isdigit() and len(member) <= 19):
        raise _invalid(receipt, "malformed")
    return int(member), f"{span}{dot}{rest}"


def _within(offset: int, ranges: list[Range]) -> bool:
    k = bisect.bisect_right(ranges, (offset, MAX_OFFSET + 1)) - 1
    return k >= 0 and offset < ranges[k][1]


def _invalid(receipt, why: str) -> InvalidReceipt:
    shown = receipt if isinstance(receipt, str) and len(receipt) <= 200 else type(receipt).__name__
    return InvalidReceipt(f"{why}: {shown!r}", "receipts")
