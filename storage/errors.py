"""Errors raised by the storage engine. Every one derives from :class:`StorageError`."""

from __future__ import annotations


class StorageError(Exception):
    """Raised when the storage engine cannot do what was asked; base of every storage error."""


class CorruptLogError(StorageError):
    """Raised when committed bytes of a file are missing or fail their checksum.

    A torn tail (bytes past the last commit) is never reported this way: it is set
    aside and cut on open. This error means data that was committed is damaged, so
    the engine refuses to guess.
    """

    def __init__(self, path: str, offset: int, reason: str = "checksum mismatch") -> None:
        super().__init__(f"{path}: corrupt at offset {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


class StorageFullError(StorageError):
    """Raised when the disk is full (ENOSPC); the batch that hit it was rolled back whole."""


class InvalidMessageError(StorageError, ValueError):
    """Raised when a message is refused before anything is written: too large, bad field."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class DeliverTimeOutOfRangeError(InvalidMessageError):
    """Raised when a deliver time is negative or beyond the maximum delay."""


class InvalidFieldError(StorageError, ValueError):
    """Raised when request JSON breaks a rule of ``message_json``; ``field`` names the culprit.

    ``code`` says which rule: ``invalid_body`` (not a JSON object), ``unknown_field``,
    ``invalid_field`` (a bad type or form), ``too_large`` or ``out_of_range``.
    """

    def __init__(self, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field


class UnknownMessageError(StorageError, KeyError):
    """Raised when a message id is malformed or names no stored message."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the plain sentence
        return str(self.args[0]) if self.args else "unknown message"


class MessageExpiredError(UnknownMessageError):
    """Raised when a message id names an hour whose files were removed by retention."""


class ReadyTrimmedError(StorageError):
    """Raised when a read asks for ready-log offsets that retention removed (below the base).

    Offsets never shift: ``base`` is the first offset the topic's ready log still holds.
    """

    def __init__(self, topic: str, offset: int, base: int) -> None:
        super().__init__(f"{topic}@{offset} was removed by retention; the ready log starts at {base}")
        self.topic = topic
        self.offset = offset
        self.base = base


class SealedHourError(StorageError):
    """Raised when a write targets an hour that was sealed (already delivered, immutable)."""


class FsyncFailedError(StorageError):
    """An fsync failed: what :mod:`~horologe.storage.durable` raises where ``os._exit`` was
    replaced (tests). A node never sees it: the process ends with the failed fsync."""

    def __init__(self, path: str, errno: int | None, strerror: str | None) -> None:
        super().__init__(f"{path}: fsync failed: errno {errno} ({strerror})")
        self.path = path
        self.errno = errno
        self.strerror = strerror
