"""Errors raised by the client SDK. Every one derives from :class:`HorologeError`."""

from __future__ import annotations


class HorologeError(Exception):
    """Raised when a call fails; ``status`` and ``code`` come from the API when it answered."""

    def __init__(self, message: str, status: int = 0, code: str = "", field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.field = field


class InvalidRequestError(HorologeError):
    """Raised when the API refuses the request as invalid (400, 413, 422)."""


class AuthError(HorologeError):
    """Raised when the token is missing or wrong (401, 403)."""


class NotFoundError(HorologeError):
    """Raised when the message or receipt does not exist (404)."""


class ConflictError(HorologeError):
    """Raised when the request conflicts with what the cluster holds (409): a schedule name
    taken by another definition (``schedule_exists``), too many schedules or push
    subscriptions, a release or a backup under way, a membership change refused."""


class AlreadyDeliveredError(ConflictError):
    """Raised when cancelling or rescheduling a message that was already delivered (409)."""


class MessageCancelledError(HorologeError):
    """Raised when rescheduling a message that was cancelled (409 ``cancelled``)."""


class UnavailableError(HorologeError):
    """Raised when no master answered within the retry budget (503, timeouts, refused connections)."""


class ServerError(HorologeError):
    """Raised when a node answered with a failure of its own, not a refusal (a 5xx but
    503: 500 an internal error, 507 a halted store, its disk full): not retried, and what
    the call did is unknown. A node that halted hands its place over: a task queue's
    worker reconnects and pulls again."""


class CertificateError(HorologeError):
    """Raised when a node's TLS certificate does not verify: not signed by a CA the client
    trusts (see ``ca=``), expired, or issued for another host. Nothing was sent; not retried."""


# Error codes whose class is not the one of their status alone: a 409 is a message's state
# (AlreadyDeliveredError) only as ``already_delivered``.
KIND_BY_CODE = {
    "schedule_exists": ConflictError,
    "too_many_schedules": ConflictError,
    "too_many_subscriptions": ConflictError,
    "release_in_progress": ConflictError,
    "no_linked_target": ConflictError,
    "backup_in_progress": ConflictError,
    "nothing_to_back_up": ConflictError,
    "not_current": ConflictError,
    # a change of the cluster's membership refused (409), not a message's state
    **dict.fromkeys(
        (
            "member_exists",
            "not_reachable",
            "wrong_node",
            "wrong_raft",
            "not_joining",
            "master_not_a_peer",
            "change_under_way",
            "change_refused",
            "is_master",
            "would_lose_quorum",
        ),
        ConflictError,
    ),
}


def error_for(status: int, body) -> HorologeError:
    err = body.get("error", {}) if isinstance(body, dict) else {}
    message = f"HTTP {status}: {err.get('code', '?')}: {err.get('message', body)}"
    code = err.get("code")
    kind = (KIND_BY_CODE.get(code) if isinstance(code, str) else None) or {
        400: InvalidRequestError,
        413: InvalidRequestError,
        422: InvalidRequestError,
        401: AuthError,
        403: AuthError,
        404: NotFoundError,
        409: AlreadyDeliveredError,
    }.get(status, UnavailableError if status in (0, 503) else ServerError if status >= 500 else HorologeError)
    if status == 409 and err.get("code") == "cancelled":
        kind = MessageCancelledError
    return kind(message, status, err.get("code", ""), err.get("field"))
