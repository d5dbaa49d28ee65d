"""The edge's errors: what each refusal answers over HTTP, in one table.

Below the edge, the node raises domain errors (:class:`~horologe.node.errors.Refused` and
its kinds, the cluster's and the storage's); :func:`answer` turns each into the JSON error
shape of DESIGN §6 with its status. :class:`ApiError` is the edge's own refusal, for what
only HTTP knows (a token, a body that is not JSON), and for the request rules
(node/http/rules/), whose status depends on the rule's code.
"""

from __future__ import annotations

from horologe.storage import InvalidFieldError

from .. import errors as node

# The status of every domain refusal; a kind not listed takes its nearest base's.
STATUS: dict[type[node.Refused], int] = {
    node.Refused: 400,
    node.InvalidRequest: 400,
    node.InvalidReceipt: 400,
    node.CallerGone: 499,  # nobody reads it: the access log's "caller hung up" (access_log.py)
    node.NotFound: 404,  # ReceiptExpired too
    node.ScheduleExists: 409,
    node.TooManySchedules: 409,
    node.TooManySubscriptions: 409,
    node.ReleaseInProgress: 409,
    node.NoLinkedTarget: 409,
    node.BackupInProgress: 409,
    node.NothingToBackUp: 409,
    node.BackupNotCurrent: 409,
    node.MemberExists: 409,
    node.MembershipChangeRefused: 409,
    node.EntryTooLarge: 413,
    node.UnknownNode: 422,
    node.ApplyFailed: 503,  # committed, on a majority: it may have applied (clients retry under its key)
    node.TransferFailed: 503,
    node.TransferUnconfirmed: 503,
    node.MembershipChangeFailed: 504,  # not 503: clients must not send the change again blindly
    node.Halted: 507,
}

# A request rule's refusal (InvalidFieldError) by its code; every other code is a 400.
# push_target_not_allowed: a push URL whose host the node config's push_allow leaves out.
RULE_STATUS = {"too_large": 413, "out_of_range": 422, "push_target_not_allowed": 422}


class ApiError(node.NodeError):
    """Raised at the edge to answer with the JSON error shape of DESIGN §6."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None, **extra) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.extra = extra

    def body(self) -> dict:
        return error_body(self.code, self.message, self.field, **self.extra)

    @classmethod
    def of_rule(cls, e: InvalidFieldError) -> ApiError:
        """The answer to a request that broke a rule of message_json or node/http/rules/."""
        return cls(RULE_STATUS.get(e.code, 400), e.code, e.message, e.field)

    @classmethod
    def of(cls, e: node.Refused) -> ApiError:
        """The answer to a domain refusal: its status from :data:`STATUS`."""
        status = next(STATUS[k] for k in type(e).__mro__ if k in STATUS)
        return cls(status, e.code, e.message, e.field)


def error_body(code: str, message: str, field: str | None = None, **extra) -> dict:
    """``{"error": {code, message[, field]}, ...extra}``."""
    err = {"code": code, "message": message}
    if field is not None:
        err["field"] = field
    return {"error": err, **extra}
