"""Push subscriptions as the replicated state holds them: in the store's small meta.

A push subscription makes a consumer group of a topic a *push group*: the master's push
worker (node/push/worker.py) leases the group's messages as a pull would and POSTs each
to the subscription's URL. Subscriptions are few (at most ``MAX_SUBSCRIPTIONS``), so
each lives in meta, written only by applying ``U`` entries (cluster/push_apply.py):

* ``push_subscriptions``: ``[[topic, group], ...]``, sorted;
* ``push/<topic>/<group>``: the definition (:class:`PushDef`), secret included. The
  secret has to be replicated (the next master signs with it); it is never answered by
  the API nor logged.

What the group has received is its progress over the ready logs, as for a pull group
(cluster/consumer_groups.py): nothing of the push worker's own is replicated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

NAMES_KEY = "push_subscriptions"
DEF_PREFIX = "push/"
MAX_SUBSCRIPTIONS = 1000


def def_key(topic: str, group: str) -> str:
    return f"{DEF_PREFIX}{topic}/{group}"


@dataclass(frozen=True)
class PushDef:
    """What a PUT asked for. ``tags`` is a tag expression as a pull takes it (``"a||b"``,
    ``"*"``); ``rate_per_s`` 0 means no limit. ``incarnation`` is the Raft index of the
    entry that wrote it: the push worker starts over when it changes."""

    topic: str
    group: str
    url: str
    secret: str
    timeout_ms: int
    max_in_flight: int
    rate_per_s: int
    tags: str
    created_at: int = 0  # the master's clock in the entry that first made it
    updated_at: int = 0  # ... that last changed it
    incarnation: int = 0

    def to_wire(self) -> dict:
        return asdict(self)

    @classmethod
    def from_wire(cls, d: dict) -> PushDef:
        return cls(**d)

    def same_request(self, other: PushDef) -> bool:
        """Whether ``other`` asks for the same subscription (a PUT sent again)."""
        mine = replace(self, created_at=0, updated_at=0, incarnation=0)
        return mine == replace(other, created_at=0, updated_at=0, incarnation=0)


# How these are read: a committed view's ``reads.meta``, or, inside an apply, the writer's
# ``store.current_meta`` (the open batch's own writes included).
Meta = Callable[..., Any]


def names(meta: Meta) -> list[tuple[str, str]]:
    """(topic, group) of every push subscription, sorted."""
    return [(str(t), str(g)) for t, g in meta(NAMES_KEY) or ()]


def definition(meta: Meta, topic: str, group: str) -> PushDef | None:
    wire = meta(def_key(topic, group))
    return None if wire is None else PushDef.from_wire(wire)


def every(meta: Meta) -> list[PushDef]:
    """Every push subscription, by (topic, group)."""
    return [d for t, g in names(meta) if (d := definition(meta, t, g)) is not None]
