"""Python client SDK for Horologe, blocking (:class:`Client`) and asyncio (:class:`AsyncClient`).

Both follow 307 redirects to the master and remember it, fail over across the node URLs
they were given, and give every produced message an idempotency key (unless you pass
one), so a send retried across a failover is stored once. :class:`RawClient` sends one
request and hands back the answer as it is (a :class:`Reply`), for tests and tools.
All three make their calls the same way (:mod:`horologe.client.calls`): the blocking ones
over the standard library's ``http.client`` (:mod:`horologe.client.blocking_http`; over
httpx when given a ``transport``), :class:`AsyncClient` over httpx; all verify the
certificates of ``https://`` nodes, against ``ca=`` when given (:mod:`horologe.client.tls`).
"""

from .async_client import AsyncClient
from .calls import Reply
from .errors import (
    AlreadyDeliveredError,
    AuthError,
    CertificateError,
    ConflictError,
    HorologeError,
    InvalidRequestError,
    MessageCancelledError,
    NotFoundError,
    ServerError,
    UnavailableError,
)
from .models import (
    Backlog,
    Forecast,
    MessageStatus,
    PendingMessage,
    PendingPage,
    PulledBatch,
    ReceivedMessage,
    Rescheduled,
    Scheduled,
    node_role,
)
from .push_subscriptions import PushSubscription
from .raw_client import RawClient
from .schedules import Schedule
from .signatures import verify_signature
from .sync_client import Client

__all__ = [
    "AlreadyDeliveredError",
    "AsyncClient",
    "AuthError",
    "Backlog",
    "CertificateError",
    "Client",
    "ConflictError",
    "Forecast",
    "HorologeError",
    "InvalidRequestError",
    "MessageCancelledError",
    "MessageStatus",
    "NotFoundError",
    "PendingMessage",
    "PendingPage",
    "PulledBatch",
    "PushSubscription",
    "RawClient",
    "ReceivedMessage",
    "Reply",
    "Rescheduled",
    "Schedule",
    "ServerError",
    "Scheduled",
    "UnavailableError",
    "node_role",
    "verify_signature",
]
