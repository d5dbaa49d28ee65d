"""A pull's answer on the wire: JSON, or msgpack for a client that accepts it.

JSON (the default): ``{"messages": [{id, receipt, topic, tags, deliver_at, delivered_at,
attempt, deliveries, key?, headers, body | body_b64}, ...], "batch_receipts": [...],
"clock_ms"}`` (``deliveries``: how often the message has been handed out, this time
counted, cluster/leases.py; ``key``: the producer's, when it gave one; ``clock_ms``: the master's clock as it
answers, no earlier than when it leased them: a consumer holding messages it got ahead
of their time learns the master's clock from it, horologe/client/holding.py).

msgpack by columns (``Accept: application/msgpack; layout=columns``, what the SDK asks
for): ``{"records": [record, ...], "receipts": [...], "deliver_at": bin, "delivered_at":
bin, "batch_receipts": [...], "clock_ms", "deliveries"?: bin}``, the two times as
little-endian int64 each; ``deliveries``, as little-endian uint32 each, only when some
message has been handed out before (left off, every count is 1).
``record`` is the message's delay-log record as stored (storage/message.py: a map of
``id, topic, tags, body`` (bin), ``deliver_at_ms, key, headers, attempt,
produced_at_ms``); one that is a map of those 9 keys travels as the flat array of its
18 keys and values in their stored order (the same bytes under an array's head), which
msgpack decodes quicker than a map. The message's topic is its header
``x-horologe-topic`` when present (a retry), else the record's topic; its id is its
header ``x-horologe-id`` when present (a rescheduled copy), else the record's id. The
node copies records without decoding them, and packs no field per message, only each
record's new head.

msgpack by messages (``Accept: application/msgpack``, what SDKs before the columns
asked for): ``{"messages": [[record, receipt, deliver_at, delivered_at], ...],
"batch_receipts", "clock_ms"}``, each record a map as stored (no count of hand-outs).
"""

from __future__ import annotations

import msgpack
import numpy as np

from horologe.cluster.consumer_groups import ID_HEADER, ORIGIN_HEADER
from horologe.storage.message import FLAT_RECORD_HEAD, RECORD_MAP_HEAD, unpack_record
from horologe.storage.message_json import body_json

from .service import Handed, Pulled

MSGPACK = "application/msgpack"
COLUMNS = "layout=columns"  # the Accept parameter that asks for msgpack by columns
_RECORD_MAP = RECORD_MAP_HEAD[0]


def as_json(pulled: Pulled, clock_ms: int) -> dict:
    return {
        "messages": [_json_message(h) for h in pulled.messages],
        "batch_receipts": pulled.batch_receipts,
        "clock_ms": clock_ms,
    }


def _json_message(h: Handed) -> dict:
    return {"receipt": h.receipt, **handed_fields(h)}


def handed_fields(h: Handed) -> dict:
    """A message a pull handed out, as its JSON answer shows it, without the receipt (a
    push's body, node/push/sender.py)."""
    return message_fields(h.record, h.deliver_at, h.delivered_at) | {"deliveries": h.deliveries}


def message_fields(record, deliver_at: int, delivered_at: int) -> dict:
    """A message of a pull's JSON answer, without its receipt, from its stored record."""
    rec = unpack_record(record)
    out = {
        "id": rec["headers"].get(ID_HEADER, rec["id"]),
        "topic": rec["headers"].get(ORIGIN_HEADER, rec["topic"]),
        "tags": rec["tags"],
        "deliver_at": deliver_at,
        "delivered_at": delivered_at,
        "attempt": rec["attempt"],
        "headers": rec["headers"],
    }
    if rec["key"] is not None:
        out["key"] = rec["key"]
    out.update(body_json(rec["body"]))
    return out


def as_msgpack(pulled: Pulled, clock_ms: int) -> bytes:
    packer = msgpack.Packer(use_bin_type=True)
    pack = packer.pack
    t = pulled.taken
    parts = [b"\x83", pack("messages"), packer.pack_array_header(len(t))]
    for record, receipt, deliver_at, delivered_at in zip(
        t.records, pulled.receipts, t.deliver_at, t.delivered_at, strict=True
    ):
        parts += (b"\x94", record, pack(receipt), pack(deliver_at), pack(delivered_at))
    parts += (pack("batch_receipts"), pack(pulled.batch_receipts), pack("clock_ms"), pack(clock_ms))
    return b"".join(parts)


def as_columns(pulled: Pulled, clock_ms: int) -> bytes:
    """The msgpack answer by columns (this module's docstring)."""
    packer = msgpack.Packer(use_bin_type=True)
    pack = packer.pack
    t = pulled.taken
    columns = (t.records, pulled.receipts, t.deliver_at, t.delivered_at, pulled.deliveries)
    if len({len(column) for column in columns}) > 1:
        raise ValueError("a pull's columns differ in length")
    again = any(n != 1 for n in pulled.deliveries)
    parts = [b"\x87" if again else b"\x86", pack("records"), packer.pack_array_header(len(t))]
    for record in t.records:
        if record[0] == _RECORD_MAP:
            parts += (FLAT_RECORD_HEAD, record[1:])
        else:
            parts.append(record)
    parts += (
        pack("receipts"),
        pack(pulled.receipts),
        pack("deliver_at"),
        pack(np.asarray(t.deliver_at, dtype="<i8").tobytes()),
        pack("delivered_at"),
        pack(np.asarray(t.delivered_at, dtype="<i8").tobytes()),
        pack("batch_receipts"),
        pack(pulled.batch_receipts),
        pack("clock_ms"),
        pack(clock_ms),
    )
    if again:
        parts += (pack("deliveries"), pack(np.asarray(pulled.deliveries, dtype="<u4").tobytes()))
    return b"".join(parts)
