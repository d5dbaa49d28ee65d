"""Receipts name positions handed to one group; anything else is refused."""

from __future__ import annotations

import pytest

from horologe.node.consumers.receipts import Receipts
from horologe.node.errors import InvalidReceipt


def _open(receipts: Receipts, group: str, receipt) -> tuple[str, list]:
    """(ready log, ranges) of one receipt."""
    return _open_all(receipts, group, [receipt])[0]


def _open_all(receipts: Receipts, group: str, each: list) -> list[tuple[str, list]]:
    return [(topic, ranges) for topic, ranges, _lease in receipts.open_leases(group, each)]


def _refused(receipts: Receipts, group: str, receipt) -> str:
    with pytest.raises(InvalidReceipt) as e:
        _open(receipts, group, receipt)
    assert e.value.code == "invalid_receipt"
    return str(e.value)


def test_a_receipt_opens_to_its_topic_and_position_on_any_node_with_the_secret():
    r = Receipts("secret").issue("g", "orders", 42, 1_000)
    assert _open(Receipts("secret"), "g", r) == ("orders", [(42, 43)])
    _refused(Receipts("other secret"), "g", r)
    _refused(Receipts("secret"), "h", r)


def test_a_batch_receipt_names_every_range_and_nothing_else():
    rs = Receipts("secret")
    r = rs.issue_ranges("g", "orders", [(0, 3), (5, 6), (9, 20)], 1_000)
    assert r.split(".")[0] == "0-2,5,9-19"
    assert _open(rs, "g", r) == ("orders", [(0, 3), (5, 6), (9, 20)])
    span, rest = r.split(".", 1)
    for other in ("0-5,9-19", "0-2,5,9-20", "0-2,5", "0-99999"):  # widened or changed: refused
        _refused(rs, "g", f"{other}.{rest}")


@pytest.mark.parametrize("bad", ["", "x", "1.2.3", "a.b.c.d", 7, None, ["1"], "\udc80.1.00.t"])
def test_malformed_receipts_are_refused_not_crashed_on(bad):
    assert "malformed" in _refused(Receipts("secret"), "g", bad)


def test_the_mac_is_keyed_blake2b_over_group_topic_span_and_lease_as_documented():
    import hashlib
    import hmac

    key = hmac.digest(b"secret", b"horologe receipts v2", "sha256")
    receipts = Receipts("secret")
    for group, topic in (("g", "orders"), ("h", "orders"), ("g", "orders")):  # a kept hasher reused
        span, lease, mac, named = receipts.issue(group, topic, 42, 1_000).split(".", 3)
        text = "\x00".join((group, topic, "42", "1000"))
        want = hashlib.blake2b(text.encode(), key=key, digest_size=16)
        assert (span, lease, mac, named) == ("42", "1000", want.hexdigest(), topic)


def test_receipts_issued_together_each_open_to_their_own_position():
    rs = Receipts("secret")
    each = rs.issue_each("g", "orders", [7, 3, 1_000_000], 1_000)
    assert each[1] == rs.issue("g", "orders", 3, 1_000)
    assert [_open(rs, "g", r) for r in each] == [("orders", [(o, o + 1)]) for o in (7, 3, 1_000_000)]


def test_a_batch_gives_its_messages_member_receipts_that_open_to_their_own_position():
    rs = Receipts("secret")
    offsets = [5, 3, 4, 10]
    batch, each = rs.issue_batch("g", "orders", offsets, 1_000)
    assert _open(rs, "g", batch) == ("orders", [(3, 6), (10, 11)])
    assert [r.split("@")[0] for r in each] == ["5", "3", "4", "10"]
    assert len({r.split("@", 1)[1] for r in each}) == 1  # one MAC for the batch's members
    assert [_open(Receipts("secret"), "g", r) for r in each] == [("orders", [(o, o + 1)]) for o in offsets]
    assert _open_all(rs, "g", [*each, batch]) == [
        *(("orders", [(o, o + 1)]) for o in offsets),
        _open(rs, "g", batch),
    ]
    _refused(rs, "h", each[0])  # another group's
    _refused(Receipts("other secret"), "g", each[0])


def test_a_message_receipt_acks_that_message_and_not_its_batch():
    rs = Receipts("secret")
    batch, each = rs.issue_batch("g", "orders", [3, 4, 5], 1_000)
    _refused(rs, "g", each[0].split("@", 1)[1])  # the member without "o@" is not a batch receipt
    _refused(rs, "g", f"4@{batch}")  # nor is a batch receipt with "o@" a member


@pytest.mark.parametrize(
    "member", ["6", "2", "9", "11", "0", "+4", " 4", "4_0", "\u0664", "", "4@4", "-4", "9" * 20]
)
def test_a_member_receipt_names_a_position_of_its_batch_or_is_refused(member):
    rs = Receipts("secret")
    _batch, each = rs.issue_batch("g", "orders", [3, 4, 5, 10], 1_000)
    _refused(rs, "g", member + "@" + each[0].split("@", 1)[1])


def test_a_topic_with_an_at_sign_does_not_make_a_member():
    rs = Receipts("secret")
    batch, each = rs.issue_batch("g", "a@b", [7], 1_000)
    assert _open(rs, "g", batch) == ("a@b", [(7, 8)])
    assert _open(rs, "g", each[0]) == ("a@b", [(7, 8)])


def test_a_scattered_batch_gives_its_messages_receipts_of_their_own():
    """Past MEMBER_RANGES ranges, a member would carry the whole long span."""
    from horologe.node.consumers.receipts import MEMBER_RANGES

    rs = Receipts("secret")
    offsets = list(range(0, 2 * (MEMBER_RANGES + 1), 2))
    batch, each = rs.issue_batch("g", "orders", offsets, 1_000)
    assert each == rs.issue_each("g", "orders", offsets, 1_000)
    assert _open(rs, "g", batch) == ("orders", [(o, o + 1) for o in offsets])
    _few, members = rs.issue_batch("g", "orders", offsets[:MEMBER_RANGES], 1_000)
    assert all("@" in r for r in members)


def test_a_receipt_opens_only_for_the_ready_logs_a_pull_of_the_call_s_topic_reads():
    rs = Receipts("secret")
    r = rs.issue("g", "orders", 42, 1_000)
    retry = rs.issue("g", "%RETRY%g", 7, 1_000)
    assert [t for t, _, _ in rs.open_leases("g", [r, retry], ("orders", "%RETRY%g"))] == [
        "orders",
        "%RETRY%g",
    ]
    with pytest.raises(InvalidReceipt, match="handed out from 'orders', not by a pull of 'invoices'"):
        rs.open_leases("g", [r], ("invoices", "%RETRY%g"))
