"""Errors raised by the time wheel. Every one derives from :class:`WheelError`."""

from __future__ import annotations


class WheelError(Exception):
    """Raised when the time wheel is asked for something it cannot do; base of wheel errors."""


class DelayTooLongError(WheelError, ValueError):
    """Raised when a message is due further ahead than the hour wheel reaches (max delay)."""


class InvalidWatermarkError(WheelError, ValueError):
    """Raised when a wheel state read from the wire or a file is malformed."""
