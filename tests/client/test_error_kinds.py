"""The SDK's exception for each refusal a node answers 409 (horologe/client/errors.py)."""

from __future__ import annotations

from horologe.client.errors import AlreadyDeliveredError, ConflictError, MessageCancelledError, error_for
from horologe.node import errors as node
from horologe.node.http.errors import STATUS


def _kinds(cls: type) -> list[type]:
    return [cls, *(k for sub in cls.__subclasses__() for k in _kinds(sub))]


def test_only_a_message_s_state_is_already_delivered():
    """A 409 of anything but a message's state (a push subscription too many, a release or
    a backup under way) was raised as AlreadyDeliveredError: ``except AlreadyDeliveredError``
    around a cancel caught it."""

    def status(kind: type) -> int:
        return next(STATUS[b] for b in kind.__mro__ if b in STATUS)

    named = [k for k in _kinds(node.Refused) if isinstance(k.__dict__.get("code"), str)]
    codes = {k.code for k in named if status(k) == 409}
    assert "too_many_subscriptions" in codes and "release_in_progress" in codes
    for code in codes:
        kind = type(error_for(409, {"error": {"code": code, "message": "m"}}))
        assert kind is ConflictError, code
    assert type(error_for(409, {"error": {"code": "already_delivered"}})) is AlreadyDeliveredError
    assert type(error_for(409, {"error": {"code": "cancelled"}})) is MessageCancelledError


def test_a_node_s_own_failure_is_one_celery_reconnects_after():
    """A pull answered 507 (the master's disk full, as it halts and steps down) or 500 was
    a plain HorologeError, in neither of the transport's error tuples: Celery's consumer
    recovers only from those, and the worker exited ("Unrecoverable error")."""
    from horologe.kombu.transport import Transport

    recoverable = Transport.connection_errors + Transport.channel_errors
    for status, code in ((500, "internal"), (507, "disk_full")):
        err = error_for(status, {"error": {"code": code, "message": "m"}})
        assert isinstance(err, recoverable), (status, type(err))
    assert not isinstance(error_for(401, {"error": {"code": "unauthorized"}}), recoverable)
