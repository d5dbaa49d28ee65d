"""Celery (kombu) on Horologe: ``import horologe.kombu``, then
``Celery(broker="horologe://n1:8081,n2:8081,n3:8081")`` (``horologe+https://`` for TLS), or
``broker_transport="horologe.kombu:Transport"``. See horologe/kombu/transport.py."""

from __future__ import annotations

from kombu.transport import TRANSPORT_ALIASES

from .revoke import revoke_scheduled
from .transport import Transport, UnroutableError

TRANSPORT_ALIASES.setdefault("horologe", "horologe.kombu.transport:Transport")

__all__ = ["Transport", "UnroutableError", "revoke_scheduled"]
