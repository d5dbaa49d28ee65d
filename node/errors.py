"""Errors raised by the node process. Every one derives from :class:`NodeError`.

A :class:`Refused` says what went wrong in the domain: which rule a request broke or why
the node cannot do it now. Its ``code`` names the reason in answers (docs/api.md); the
HTTP status each one answers with is decided at the edge, in one table
(node/http/errors.py), never here.
"""

from __future__ import annotations


class NodeError(Exception):
    """Raised when the node cannot serve a request or start; base of node errors."""


class ConfigError(NodeError):
    """Raised when the node configuration is missing, malformed or inconsistent."""


class DataDirInUseError(NodeError):
    """Raised when another process holds the node's data folder (node/data_lock.py)."""


class DataDirUnusableError(NodeError):
    """Raised when the node's data folder is a file, or cannot be made or opened."""


class ListenError(NodeError):
    """Raised when the node cannot listen on its HTTP address (taken, or not this host's)."""


class Refused(NodeError):
    """Raised when the node refuses a request; ``field`` names the part of it at fault (a
    subclass names ``code``)."""

    code = "refused"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidRequest(Refused):
    """Raised when a request's field has a bad type or form (a tag expression, say)."""

    code = "invalid_field"


class CallerGone(Refused):
    """Raised when a pull's caller hung up before it was answered: nothing was leased to it."""

    code = "client_closed"


class InvalidReceipt(Refused):
    """Raised when a receipt is malformed, forged, or names another group's delivery."""

    code = "invalid_receipt"


class NotFound(Refused):
    """Raised when a request names a schedule, subscription or delivery that is not there."""

    code = "not_found"


class ReceiptExpired(NotFound):
    """Raised when a receipt names a delivery that retention has since removed."""

    code = "expired"


class ScheduleExists(Refused):
    """Raised when a schedule's name is taken by another definition."""

    code = "schedule_exists"


class TooManySchedules(Refused):
    """Raised when a new schedule would pass the cluster's limit."""

    code = "too_many_schedules"


class TooManySubscriptions(Refused):
    """Raised when a new push subscription would pass the cluster's limit."""

    code = "too_many_subscriptions"


class EntryTooLarge(Refused):
    """Raised when a call would make a Raft entry over the cap (MAX_ENTRY_BYTES)."""

    code = "too_large"


class Halted(Refused):
    """Raised when this node stopped applying (a fatal storage error) and so serves nothing."""

    code = "halted"


class ApplyFailed(Refused):
    """Raised when a committed entry failed to apply on this node."""

    code = "apply_failed"


class ReleaseInProgress(Refused):
    """Raised when a release of this master is asked while another is under way."""

    code = "release_in_progress"


class UnknownNode(Refused):
    """Raised when a release names a node that is not a peer."""

    code = "unknown_node"


class NoLinkedTarget(Refused):
    """Raised when no peer could take over and be heard by every node."""

    code = "no_linked_target"


class TransferFailed(Refused):
    """Raised when no other node took over; this node is still master."""

    code = "transfer_failed"


class TransferUnconfirmed(Refused):
    """Raised when the transfer took effect, or may have, unconfirmed: another node took
    over but too few nodes follow it yet, or this node stepped down and none took over yet."""

    code = "transfer_unconfirmed"


class BackupInProgress(Refused):
    """Raised when a backup of this node is asked while another is being sent."""

    code = "backup_in_progress"


class NothingToBackUp(Refused):
    """Raised when this node has applied too little to back up (a cluster just made)."""

    code = "nothing_to_back_up"


class BackupNotCurrent(Refused):
    """Raised when this node's copy may be behind the cluster's (not a member, no master
    known, no majority heard) and the backup was not asked to allow that."""

    code = "not_current"


class MemberExists(Refused):
    """Raised when a node to add has the id or an address of a member already."""

    code = "member_exists"


class MembershipChangeRefused(Refused):
    """Raised when a change of the membership cannot start now: another is under way
    (``change_under_way``, ``change_refused``), it would remove the master itself
    (``is_master``: release it first), the new node does not answer (``not_reachable``), is
    another node than named (``wrong_node``), at another Raft address (``wrong_raft``), was
    not started to join (``not_joining``) or does not have the master among its peers
    (``master_not_a_peer``), or the members left would make no majority the
    master hears (``would_lose_quorum``)."""

    def __init__(self, message: str, code: str, field: str | None = None) -> None:
        super().__init__(message, field)
        self.code = code


class MembershipChangeFailed(Refused):
    """Raised when a change of the membership started but did not complete in time: the
    new node did not catch up (``catch_up_failed``: nothing changed), the master lost the
    lead before proposing it (``lost_lead``: nothing changed), or no answer came once it
    was proposed (``not_committed``: it may still be made; look at the members)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code
