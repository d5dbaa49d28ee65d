"""Errors raised by the node process. Every one derives from :class:`NodeError`."""

from __future__ import annotations


class NodeError(Exception):
    """Raised when the node cannot serve a request or start; base of node errors."""


class ConfigError(NodeError):
    """Raised when the node configuration is missing, malformed or inconsistent."""


class ApiError(NodeError):
    """Raised by a handler to answer with the JSON error shape of DESIGN §6."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None, **extra) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.extra = extra

    def body(self) -> dict:
        err = {"code": self.code, "message": self.message}
        if self.field is not None:
            err["field"] = self.field
        return {"error": err, **self.extra}
