"""Waiting for a condition instead of sleeping a fixed time: done as soon as it holds,
a clear failure when it never does."""

from __future__ import annotations

import time
from collections.abc import Callable

from horologe.client import HorologeError


def wait_until(what: Callable[[], object], timeout_s: float, *, interval_s: float = 0.05) -> float:
    """Poll ``what()`` until it is truthy; returns the seconds it took.

    Raises TimeoutError naming ``what`` (its docstring, else its name) after ``timeout_s``.
    A node that does not answer yet (HorologeError) counts as not yet.
    """
    t0 = time.monotonic()
    while True:
        try:
            if what():
                return time.monotonic() - t0
        except HorologeError:
            pass
        if time.monotonic() - t0 > timeout_s:
            name = (what.__doc__ or getattr(what, "__name__", "a condition")).strip()
            raise TimeoutError(f"not within {timeout_s:g} s: {name}")
        time.sleep(interval_s)
