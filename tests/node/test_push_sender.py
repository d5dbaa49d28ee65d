"""A push as bytes and its answer's meaning (node/push/sender.py), read with the clock
passed in."""

from __future__ import annotations

import hashlib
import hmac

from horologe.node.push.client import Answer, Origin
from horologe.node.push.sender import Target, outcome, request, retry_after_ms

NOW = 1_767_225_600_000  # Thu, 01 Jan 2026 00:00:00 GMT


def test_seconds_and_dates():
    assert retry_after_ms("0", NOW) == 0
    # Digits str.isdigit() takes and int() does not, and more than int() reads: unreadable
    # or past any retry level, never an error (it left the push's slot taken for good).
    assert retry_after_ms("\u00b2", NOW) is None
    assert retry_after_ms("9" * 4301, NOW) >= 10**15
    assert retry_after_ms(" 120 ", NOW) == 120_000
    assert retry_after_ms("Thu, 01 Jan 2026 00:00:30 GMT", NOW) == 30_000
    assert retry_after_ms("Wed, 31 Dec 2025 23:00:00 GMT", NOW) == 0  # passed: at once


def test_absent_or_unreadable_is_none():
    for value in (None, "", "soon", "-5", "1.5", "Thu, 01 Jan 2026 00:00:30"):
        assert retry_after_ms(value, NOW) is None, value


def test_targets_name_their_origin_and_host():
    assert Target.of("https://hooks.example.com/a/b?c=d").origin == Origin("https", "hooks.example.com", 443)
    plain = Target.of("http://127.0.0.1/x")
    assert plain.origin == Origin("http", "127.0.0.1", 80) and b"Host: 127.0.0.1\r\n" in plain.head
    v6 = Target.of("http://[::1]:8080")
    assert v6.origin == Origin("http", "::1", 8080) and v6.head.startswith(b"POST / HTTP/1.1\r\n")
    assert b"Host: [::1]:8080\r\n" in v6.head


def test_a_request_is_signed_over_its_exact_body():
    body = b'{"id": "00000001"}'
    raw = request(
        Target.of("http://127.0.0.1:9/hook"),
        "s3cret-0123456789",
        body,
        {"id": "x1", "attempt": 2, "deliveries": 3},
        NOW,
    )
    head, _, sent = raw.partition(b"\r\n\r\n")
    assert sent == body
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /hook HTTP/1.1" and f"Content-Length: {len(body)}" in lines
    assert "Horologe-Message-Id: x1" in lines and "Horologe-Attempt: 2" in lines
    assert "Horologe-Deliveries: 3" in lines
    mac = hmac.new(b"s3cret-0123456789", b"1767225600." + body, hashlib.sha256).hexdigest()
    assert f"Horologe-Signature: t=1767225600,v1={mac}" in lines


def test_only_a_2xx_succeeds():
    assert outcome(Answer(200), NOW).ok and outcome(Answer(299), NOW).ok
    for status in (199, 301, 302, 404, 500):
        assert not outcome(Answer(status), NOW).ok
    late = outcome(Answer(503, "60"), NOW)
    assert not late.ok and late.status == 503 and late.retry_after_ms == 60_000
    gone = outcome(Answer(None, None, "no answer within 100 ms"), NOW)
    assert not gone.ok and gone.status is None and gone.error == "no answer within 100 ms"
