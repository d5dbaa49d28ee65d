"""Dramatiq on Horologe: ``dramatiq.set_broker(HorologeBroker(urls, token))``
(horologe/dramatiq/broker.py)."""

from .broker import HorologeBroker

__all__ = ["HorologeBroker"]
