"""A push's Retry-After, read as ms from the clock passed in (node/push_sender.py)."""

from __future__ import annotations

from horologe.node.push_sender import retry_after_ms

NOW = 1_767_225_600_000  # Thu, 01 Jan 2026 00:00:00 GMT


def test_seconds_and_dates():
    assert retry_after_ms("0", NOW) == 0
    assert retry_after_ms(" 120 ", NOW) == 120_000
    assert retry_after_ms("Thu, 01 Jan 2026 00:00:30 GMT", NOW) == 30_000
    assert retry_after_ms("Wed, 31 Dec 2025 23:00:00 GMT", NOW) == 0  # passed: at once


def test_absent_or_unreadable_is_none():
    for value in (None, "", "soon", "-5", "1.5", "Thu, 01 Jan 2026 00:00:30"):
        assert retry_after_ms(value, NOW) is None, value
