"""Replication: the Raft state machine (pure) and its pysyncobj shell."""

from .apply_result import ApplyResult
from .committed_reads import CANCELLED, DELIVERED, SCHEDULED, UNKNOWN
from .entries import ACK, CANCEL, MOVE, PRODUCE, RELEASE, RETRY, SYNC, TRIM, Entry, EntryKind, decode
from .errors import (
    ClusterError,
    EntryDroppedError,
    NotMasterError,
    ProposalRejectedError,
    ProposalTimeoutError,
)
from .raft.proposal_outcome import all_committed
from .raft.settings import ClusterSettings, Peer
from .state_machine import StateMachine

__all__ = [
    "ACK",
    "RETRY",
    "CANCEL",
    "CANCELLED",
    "MOVE",
    "DELIVERED",
    "PRODUCE",
    "RELEASE",
    "SCHEDULED",
    "SYNC",
    "TRIM",
    "UNKNOWN",
    "ApplyResult",
    "ClusterError",
    "EntryDroppedError",
    "ClusterSettings",
    "Entry",
    "EntryKind",
    "NotMasterError",
    "Peer",
    "ProposalRejectedError",
    "ProposalTimeoutError",
    "StateMachine",
    "all_committed",
    "decode",
]
