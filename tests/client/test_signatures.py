"""Push signatures: what the node signs (node/push/signature.py) the SDK's
verify_signature accepts, and it refuses anything else: another secret or body, a
stale or future timestamp, a malformed header."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from horologe.client import verify_signature
from horologe.node.push.signature import signature

SECRET = "0123456789abcdef"
BODY = b'{"id":"0007a3b20000002a","body":"hello"}'
T = 1_767_225_600


def test_what_the_node_signs_verifies():
    header = signature(SECRET, T, BODY)
    want = hmac.new(SECRET.encode(), f"{T}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert header == f"t={T},v1={want}"  # the documented format
    assert verify_signature(SECRET, header, BODY, now_s=T)
    assert verify_signature(SECRET.encode(), header, BODY.decode(), now_s=T + 299)
    assert verify_signature(SECRET, f"v1=00,{header}", BODY, now_s=T)  # another v1 beside it


@pytest.mark.parametrize(
    "secret, body, now",
    [
        ("another-secret-xx", BODY, T),
        (SECRET, BODY + b" ", T),
        (SECRET, BODY, T + 301),  # stale: a replay
        (SECRET, BODY, T - 301),  # from the future
    ],
)
def test_anything_else_is_refused(secret, body, now):
    assert not verify_signature(secret, signature(SECRET, T, BODY), body, now_s=now)


@pytest.mark.parametrize(
    "header",
    [None, "", "t=abc,v1=00", f"v1={'0' * 64}", f"t={T}", f"t=-{T},v1=00", "garbage"],
)
def test_a_malformed_header_is_refused(header):
    assert not verify_signature(SECRET, header, BODY, now_s=T)


def test_the_tolerance_is_a_parameter():
    header = signature(SECRET, T, BODY)
    assert not verify_signature(SECRET, header, BODY, tolerance_s=5, now_s=T + 6)
    assert verify_signature(SECRET, header, BODY, tolerance_s=5, now_s=T + 5)


@pytest.mark.parametrize(
    "header",
    ["t=²,v1=00", "t=1" + "0" * 5000 + ",v1=00", f"t={T},v1=é", f"t={T},v1=\udcff", f"t={T},v1=\ud800"],
)
def test_a_malformed_header_is_refused_however_odd_its_characters(header):
    """A superscript digit passes isdigit() and fails int(); a MAC of non-ASCII
    characters made compare_digest raise: anyone could make a receiver answer 500."""
    assert verify_signature(SECRET, header, BODY, now_s=T) is False
