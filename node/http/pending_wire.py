"""A pending message as ``GET /v1/topics/{topic}/pending`` shows it."""

from __future__ import annotations

from horologe.cluster.consumer_groups import ID_HEADER
from horologe.storage.message import StoredMessage
from horologe.storage.message_json import body_json


def pending_json(stored: StoredMessage, slot_ms: int, with_body: bool) -> dict:
    """``{id, deliver_at, fires_at, key?, tags, headers, body | body_b64?}``: ``fires_at``
    differs from ``deliver_at`` only for a message that arrived after its time had passed
    and waits behind the wheel; bodies only when asked for."""
    m = stored.message
    ident = m.headers.get(ID_HEADER, str(stored.id))  # a rescheduled copy or a retry: its first's
    out = {"id": ident, "deliver_at": m.deliver_at_ms, "fires_at": slot_ms, "tags": list(m.tags)}
    if m.key is not None:
        out["key"] = m.key
    out["headers"] = m.headers
    return out | body_json(m.body) if with_body else out
