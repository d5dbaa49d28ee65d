"""What the task-queue integrations (horologe.kombu, horologe.dramatiq) share: a queue's
topic name, and the idempotency key of a task's publish."""

from __future__ import annotations

import hashlib
import math
import re
from datetime import UTC, datetime

NAME_MAX = 128
_BAD = re.compile(r"[^A-Za-z0-9._-]")


def topic_name(queue: str, prefix: str = "") -> str:
    """``prefix + queue`` as a topic (or group) name: 1-128 of ``A-Z a-z 0-9 . _ -``, not
    starting with ``. _ -``. A name that needs changing (Celery's ``pidbox`` queues hold
    ``@``) or is too long gets a hash of the original at its end, so two queues never share
    a topic."""
    name = prefix + queue
    safe = _BAD.sub("_", name)
    if safe[:1] in ("", ".", "_", "-"):
        safe = "q" + safe
    if safe == name and len(safe) <= NAME_MAX:
        return safe
    digest = hashlib.blake2b(name.encode(), digest_size=6).hexdigest()
    return f"{safe[: NAME_MAX - len(digest) - 1]}-{digest}"


def eta_ms(eta) -> int | None:
    """An ISO-8601 ``eta`` (a naive one is UTC) as epoch ms, rounded up so a task is never
    handed out before it; None for none."""
    if not eta:
        return None
    when = eta if isinstance(eta, datetime) else datetime.fromisoformat(str(eta))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return math.ceil(when.timestamp() * 1000)


def task_key(kind: str, task_id, retries, replaced=None) -> str | None:
    """``kind:{id}:{retries}``: a republish of one attempt is stored once, a retry (a new
    attempt under the same id) is a message of its own. ``replaced``: how many times the
    task was replaced under its id (Celery's ``Task.replace``, its ``replaced_task_nesting``
    header); above 0, ``kind:{id}:{retries}:r{replaced}``, so that a replacement is a
    message of its own too. None without an id."""
    if not task_id:
        return None
    key = f"{kind}:{task_id}:{int(retries or 0)}"
    return f"{key}:r{int(replaced)}" if replaced and int(replaced) > 0 else key
