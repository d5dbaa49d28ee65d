"""The node's logs: text lines or JSON objects on stderr, each with the id of the HTTP
request it was logged in, if any.

The request id lives in a context variable that the ``request_ids`` middleware
(node/http/access_log.py) sets for the request's task; a filter copies it onto every record
logged in that task, so lines from deep inside a request carry it too. JSON is written
by python-json-logger (on orjson): ``ts``, ``level``, ``logger``, ``node``, ``msg``,
``request_id`` when there is one, ``exc_info`` when there is one, and an access line's
fields (``method``, ``path``, ``status``, ``ms``, ``peer``).
"""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar

from pythonjsonlogger.orjson import OrjsonFormatter

REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)


class RequestIdFilter(logging.Filter):
    """Give a record logged inside a request that request's id (``record.request_id``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        rid = REQUEST_ID.get()
        if rid is not None and not hasattr(record, "request_id"):
            record.request_id = rid
        return True


def configure_logging(node_id: str, log_format: str, level: int = logging.INFO) -> None:
    """Replace the root logger's handlers with one writing ``log_format`` (text, json) to stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RequestIdFilter())
    if log_format == "json":
        handler.setFormatter(
            OrjsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s",  # and every extra field
                rename_fields={"asctime": "ts", "levelname": "level", "name": "logger", "message": "msg"},
                static_fields={"node": node_id},
            )
        )
    else:
        handler.setFormatter(logging.Formatter(f"%(asctime)s {node_id} %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
