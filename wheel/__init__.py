"""The two-level time wheel (seconds within the hour, hours up to the maximum delay).

Pure: no threads, no sleeps, no clock. Time comes in as ``now_ms``.
"""

from .errors import DelayTooLongError, InvalidWatermarkError, WheelError
from .expand import SecondCache, expand
from .hot_lead import ranks_looked_at, stretched_lead
from .loaded_second import DUE
from .realign import FastForward, Sleep, realign
from .time_wheel import TimeWheel
from .watermark import ALL, Watermark

__all__ = [
    "ALL",
    "DUE",
    "DelayTooLongError",
    "FastForward",
    "InvalidWatermarkError",
    "SecondCache",
    "Sleep",
    "TimeWheel",
    "Watermark",
    "WheelError",
    "expand",
    "ranks_looked_at",
    "realign",
    "stretched_lead",
]
