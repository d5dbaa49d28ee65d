"""Horologe: a replicated delayed-message service."""

__version__ = "0.1.0"
