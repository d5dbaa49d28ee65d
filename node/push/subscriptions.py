"""The node's side of push subscriptions: the ``U`` entries the API proposes, and the
answers it gives from the committed view and the push worker (node/push/worker.py).

Every answer of a write comes from what its entry did when applied
(``ApplyResult.subscription``): 201 created, 200 replaced or the same again, 409 past the
limit, 404 no such subscription.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from horologe.cluster import ApplyResult
from horologe.cluster.entries import SUBSCRIBE
from horologe.cluster.push_apply import DELETE, PUT, PushOutcome
from horologe.cluster.push_state import MAX_SUBSCRIPTIONS, PushDef, definition

from ..committed_view import CommittedView
from ..errors import NotFound, TooManySubscriptions
from .worker import PushStats, PushWorker

Propose = Callable[..., Awaitable[ApplyResult]]  # NodeService.propose(kind, **fields)


class Subscriptions:
    def __init__(self, view: CommittedView, propose: Propose, worker: PushWorker) -> None:
        self._view = view
        self._propose = propose
        self._worker = worker

    async def _control(self, op: str, topic: str, group: str, **more) -> PushOutcome:
        res = await self._propose(SUBSCRIBE, subscription={"op": op, "topic": topic, "group": group, **more})
        return PushOutcome(res.subscription)

    async def put(self, wanted: PushDef) -> tuple[int, dict]:
        """(status, body): 201 made, 200 replaced or unchanged."""
        done = await self._control(PUT, wanted.topic, wanted.group, **{"def": wanted.to_wire()})
        if done == PushOutcome.LIMIT:
            raise TooManySubscriptions(
                f"{MAX_SUBSCRIPTIONS} push subscriptions exist; delete one first", "group"
            )
        return (201 if done == PushOutcome.CREATED else 200), self.get(wanted.topic, wanted.group)

    async def delete(self, topic: str, group: str) -> dict:
        if await self._control(DELETE, topic, group) == PushOutcome.NOT_FOUND:
            raise _not_found(topic, group)
        return {"topic": topic, "group": group, "state": "deleted"}

    def get(self, topic: str, group: str) -> dict:
        d = definition(self._view.reads.meta, topic, group)
        if d is None:
            raise _not_found(topic, group)
        stats = self._worker.stats.get((topic, group), PushStats())
        return subscription_json(d, stats, self._worker.allowed(d), self._view.unacked_count(group, topic))


def _not_found(topic: str, group: str) -> NotFound:
    return NotFound(f"group {group!r} has no push subscription on {topic!r}", "group")


def subscription_json(d: PushDef, stats: PushStats, allowed: bool, unacked: int) -> dict:
    """A subscription as the API shows it: never its secret."""
    return {
        "topic": d.topic,
        "group": d.group,
        "push": {
            "url": d.url,
            "timeout_ms": d.timeout_ms,
            "max_in_flight": d.max_in_flight,
            "rate_per_s": d.rate_per_s,
            "tags": d.tags,
        },
        "allowed": allowed,
        "created_at": d.created_at,
        "updated_at": d.updated_at,
        "counters": {
            "delivered": stats.delivered,
            "retried": stats.retried,
            "dead_lettered": stats.dead_lettered,
            "in_flight": stats.in_flight,
        },
        "unacked": unacked,
    }
