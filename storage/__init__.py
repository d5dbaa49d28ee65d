"""Hour-bucket storage: delay logs and indexes by delivery hour, ready logs, key index.

A pure library: no networking, no threads, no clock. See ``store`` for the layout
and each module's docstring for its file format (collected in docs/storage.md).
"""

import numpy.ma  # noqa: F401 - np.unique loads it on its first call: here, not in a node's first apply (~13 ms)

from .check import CheckReport, check_store
from .config import StorageConfig
from .errors import (
    CorruptLogError,
    DeliverTimeOutOfRangeError,
    InvalidFieldError,
    InvalidMessageError,
    MessageExpiredError,
    ReadyTrimmedError,
    SealedHourError,
    StorageError,
    StorageFullError,
    UnknownMessageError,
)
from .message import Message, MessageLimits, StoredMessage
from .message_columns import MessageColumns
from .message_id import MessageId, id_strings
from .ready_log import ReadyEntry, ready_ids, ready_rows
from .store import SKIPPED, Storage
from .tag_signature import may_match, tag_signature, tags_signature
from .transaction import Transaction

__all__ = [
    "SKIPPED",
    "CheckReport",
    "CorruptLogError",
    "DeliverTimeOutOfRangeError",
    "InvalidFieldError",
    "InvalidMessageError",
    "Message",
    "MessageColumns",
    "MessageExpiredError",
    "MessageId",
    "MessageLimits",
    "ReadyEntry",
    "ready_rows",
    "ReadyTrimmedError",
    "SealedHourError",
    "Storage",
    "StorageConfig",
    "StorageError",
    "StorageFullError",
    "StoredMessage",
    "check_store",
    "id_strings",
    "ready_ids",
    "Transaction",
    "UnknownMessageError",
    "may_match",
    "tag_signature",
    "tags_signature",
]
