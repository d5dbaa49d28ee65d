"""Builders shared by the storage tests."""

from __future__ import annotations

import os

from horologe.storage import Message

HOUR = 491_000  # an hour number in 2026
H0 = HOUR * 3_600_000  # its first millisecond


def msg(
    deliver_at_ms: int,
    *,
    body: bytes = b"payload",
    topic: str = "orders",
    key=None,
    tags=(),
    produced_at_ms: int | None = None,
) -> Message:
    return Message(
        topic=topic,
        body=body,
        deliver_at_ms=deliver_at_ms,
        produced_at_ms=H0 if produced_at_ms is None else produced_at_ms,
        tags=tuple(tags),
        key=key,
    )


def tree_bytes(root: str) -> dict[str, bytes]:
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


def replica_state(root: str, config=None) -> tuple[dict[str, bytes], dict]:
    """What replicas fed the same batches must agree on: every data file byte for byte
    (caches aside), and what the commit journal says (its frames differ where sync
    points fell: storage/commit_journal.py)."""
    from horologe.storage import Storage

    files = {k: v for k, v in tree_bytes(root).items() if not k.endswith((".heads", "commits.log"))}
    with Storage(root, config) as s:
        return files, s.checkpoint_record()
