"""Errors raised by the replicated cluster layer. Every one derives from :class:`ClusterError`."""

from __future__ import annotations


class ClusterError(Exception):
    """Raised when the cluster cannot do what was asked; base of cluster errors."""


class NotMasterError(ClusterError):
    """Raised when a write reaches a node that is not the master; ``leader`` names the one
    it believes is (None during an election, or ``why`` it knows none)."""

    def __init__(self, leader: str | None, why: str | None = None) -> None:
        super().__init__(f"not the master; master is {leader}" if leader else why or NO_MASTER_KNOWN)
        self.leader = leader


NO_MASTER_KNOWN = "not the master; master is unknown (election under way)"


class ProposalTimeoutError(ClusterError):
    """Raised when a proposed entry was neither committed nor rejected in time."""


class ProposalRejectedError(ClusterError):
    """Raised when Raft did not commit a proposed entry, and the request it served may have
    taken effect: the leader changed before the entry was known to commit (it may still),
    or other entries of the same request committed. (Also a full proposal queue.)"""


class EntryDroppedError(ProposalRejectedError):
    """Raised when Raft dropped a proposed entry for certain: it was never appended (this
    node no longer led, knew no leader, or denied it) or a new master committed another
    entry in its place. Nothing was done: resending it is safe."""


class BadEntryError(ClusterError, ValueError):
    """Raised when a log entry cannot be decoded; apply records it and moves on."""


class InsecureConfigError(ClusterError):
    """Raised when a node would start without a cluster secret outside dev mode."""


class UnsupportedPysyncobjError(ClusterError):
    """Raised at start when the installed pysyncobj is not a version the Raft shell was
    checked against, or lacks an internal name the shell overrides or reaches."""


class StoreBehindDumpError(ClusterError):
    """Raised at start when the store has applied less than this node's Raft dump covers."""


class StaleJournalViewError(ClusterError):
    """Raised when a lazy view of the Raft journal is read after the journal was cut or
    rewritten (its positions no longer name the entries it was made for)."""


class InvalidScheduleError(ClusterError, ValueError):
    """Raised when a schedule's cron expression or time zone is one it cannot fire by;
    ``field`` names which, ``code`` the rule (``invalid_field``, or ``out_of_range`` for
    an expression that never fires)."""

    def __init__(self, message: str, field: str, code: str = "invalid_field") -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.code = code


class WriterTimeoutError(ClusterError):
    """Raised when the tick thread did not answer a question for the writer in time
    (writer_questions.py): it is busy applying, or stopped."""


class MembershipChangeError(ClusterError):
    """Raised when a change of the membership was not made; ``code`` says why
    (cluster/raft/node.py, ``RaftNode._start_change`` and after)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
