"""Applying a ``U`` entry (put or delete a push subscription), on every node alike. State
layout in cluster/push_state.py.

The answer is decided here, from the committed state (``ApplyResult.subscription``): two
PUTs of one subscription race to the log, and each is told what it did.

* **put** stores the definition: ``created`` when there was none, ``updated`` when it
  replaces another (the push worker starts over with it), ``unchanged`` when it is the
  same request again; ``limit`` when ``MAX_SUBSCRIPTIONS`` exist.
* **delete** drops it: ``deleted``, or ``not_found``. The group's progress stays, as a
  pull group's does: a group pushed again later goes on where it stopped.
"""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum

from horologe.storage import Transaction

from .entries import Entry
from .errors import BadEntryError
from .push_state import MAX_SUBSCRIPTIONS, NAMES_KEY, PushDef, def_key, definition, names


class PushOutcome(StrEnum):
    """What a ``U`` entry did (``ApplyResult.subscription``); the node answers by it."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    LIMIT = "limit"
    DELETED = "deleted"
    NOT_FOUND = "not_found"


PUT, DELETE = "put", "delete"


def apply_subscription(meta, tx: Transaction, entry: Entry, raft_index: int) -> PushOutcome:
    """A ``U`` entry. ``meta`` reads the state as this batch left it (``store.current_meta``)."""
    sub = entry.subscription
    op, topic, group = sub.get("op"), sub.get("topic"), sub.get("group")
    if op not in (PUT, DELETE) or not isinstance(topic, str) or not isinstance(group, str):
        raise BadEntryError(f"subscription entry with op {op!r}, topic {topic!r}, group {group!r}")
    held = definition(meta, topic, group)
    taken = names(meta)
    if op == DELETE:
        if held is None:
            return PushOutcome.NOT_FOUND
        tx.set_meta(def_key(topic, group), None)
        tx.set_meta(NAMES_KEY, [list(n) for n in taken if n != (topic, group)])
        return PushOutcome.DELETED
    try:
        wanted = PushDef.from_wire(sub["def"])
    except (KeyError, TypeError, ValueError) as e:
        raise BadEntryError(f"subscription entry with a bad definition: {e}") from e
    if (wanted.topic, wanted.group) != (topic, group):
        raise BadEntryError(f"subscription entry for {topic}/{group} defines {wanted.topic}/{wanted.group}")
    if held is not None and held.same_request(wanted):
        return PushOutcome.UNCHANGED
    if held is None and len(taken) >= MAX_SUBSCRIPTIONS:
        return PushOutcome.LIMIT
    created = entry.clock_ms if held is None else held.created_at
    made = replace(wanted, created_at=created, updated_at=entry.clock_ms, incarnation=raft_index)
    tx.set_meta(def_key(topic, group), made.to_wire())
    if held is None:
        tx.set_meta(NAMES_KEY, [list(n) for n in sorted([*taken, (topic, group)])])
        return PushOutcome.CREATED
    return PushOutcome.UPDATED
