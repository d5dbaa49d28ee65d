"""The API's answers as typed models, for their JSON Schemas in /openapi.json: what each
route answers (node/http/*.py, node/service.py, node/consumers/wire.py), field by field.
A field that is not always there defaults to ``UNSET``; one that may be null is ``X | None``.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from horologe.cluster.committed_reads import COUNTERS

from ..rules.model import EpochMs, MessageId, Name


class Answer(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """An answer: these fields and no other."""


Count = Annotated[int, Meta(ge=0)]
ProducerKey = Annotated[str, Meta(description="the producer's key, when it gave one")]
Results = Annotated[list, Meta(description="one per item, in order")]  # items: schemas.EXTRA


class Content(Answer, kw_only=True):
    """What a message carries, as pull, pending and DLQ answers show it."""

    tags: list[str]
    headers: dict[str, str]
    body: str | UnsetType = UNSET
    body_b64: Annotated[str, Meta(description="when the body is not UTF-8")] | UnsetType = UNSET


class Scheduled(Answer):
    id: MessageId
    topic: Name
    deliver_at: EpochMs


class BatchScheduled(Answer):
    """An item of a batch, stored, or named by its key already: the id and `deliver_at` are that message's."""

    id: MessageId
    deliver_at: EpochMs


class BatchResults(Answer):
    results: Results


class MessageStatus(Answer):
    id: MessageId
    topic: Name
    state: Literal["scheduled", "delivered", "cancelled", "dropped", "dead_lettered"]
    deliver_at: EpochMs
    delivered_at: (
        Annotated[EpochMs, Meta(description="the master's clock in the entry that delivered it")] | UnsetType
    ) = UNSET
    late_by_ms: (
        Annotated[
            int,
            Meta(
                ge=0,
                description="how late it was delivered, dropped or dead-lettered (ms after `deliver_at`)",
            ),
        ]
        | UnsetType
    ) = UNSET


class Rescheduled(Answer):
    id: MessageId
    topic: Name
    state: Literal["scheduled"]
    deliver_at: EpochMs


class BatchRescheduled(Answer):
    """An item of a batch of reschedules, moved."""

    id: MessageId
    state: Literal["scheduled"]
    deliver_at: EpochMs


class RescheduleResults(Answer):
    results: Annotated[
        list,
        Meta(
            description="one per item, in order: the id the message keeps and its new time, or the error "
            "(`not_found`, `already_delivered`, `cancelled`, or a validation error)"
        ),
    ]


class Cancelled(Answer):
    id: str
    state: Literal["cancelled"]


class PulledMessage(Content):
    id: MessageId
    receipt: str
    topic: Annotated[str, Meta(description="the topic it was produced to, even for retries")]
    deliver_at: EpochMs
    delivered_at: EpochMs
    attempt: Count
    deliveries: Annotated[
        int,
        Meta(
            ge=1,
            description="how often this attempt has been handed out, this time counted: above 1, a lease "
            "of it ended or was released before, and another consumer may have had it",
        ),
    ]
    key: ProducerKey | UnsetType = UNSET


class Pulled(Answer):
    clock_ms: Annotated[int, Meta(description="the master's clock (epoch ms) as it answered")]
    messages: list[PulledMessage]
    batch_receipts: Annotated[
        list[str], Meta(description="name every message of this answer, one per ready log read")
    ]


class Acked(Answer):
    acked: Count


class Nacked(Answer):
    retried: Count
    dead_lettered: Count


class LeasesReleased(Answer):
    released: Annotated[
        int, Meta(ge=0, description="messages whose lease these receipts still held, now given back")
    ]


class Backlog(Answer):
    topic: str
    group: str
    unacked: Annotated[int, Meta(ge=0, description="messages of the ready log the group has not acked")]
    leased: Annotated[int, Meta(ge=0, description="of those, the ones a consumer holds (a lease not ended)")]
    waiting: Annotated[int, Meta(ge=0, description="of those, the ones due and waiting for a pull")]


class Purged(Answer):
    purged: Annotated[int, Meta(ge=0, description="messages acked: due, unacked, held by no consumer")]


class Extended(Answer):
    extended: Annotated[int, Meta(ge=0, description="messages whose lease these receipts still held")]
    lease_until: Annotated[int, Meta(description="their lease's new end, epoch ms by the master's clock")]


class Released(Answer):
    old_master: str
    new_master: str
    gap_ms: Annotated[
        float | None,
        Meta(
            description="from stopping the old wheel to the new master's first sync applied on the old master"
        ),
    ]
    heard_by: list[str]


class CatchUp(Answer):
    """A learner's catch-up, as the master sees it: it is added once ``held`` reaches ``target``."""

    held: Annotated[int, Meta(description="the Raft index up to which it holds the master's log")]
    target: Annotated[int, Meta(description="the master's commit index when its catch-up began")]


class ClusterMember(Answer):
    node_id: str
    raft: Annotated[str, Meta(description="its Raft address: its identity")]
    http: Annotated[str, Meta(description="its HTTP address, as the members reach it")]
    voter: Annotated[bool, Meta(description="false for a node the master feeds before the change adding it")]
    self: Annotated[bool, Meta(description="the node that answered")]
    linked: Annotated[bool, Meta(description="the answering node has a live Raft link to it")]
    catch_up: CatchUp | UnsetType = UNSET


class Members(Answer):
    """The membership as the answering node's Raft log has it, that node first."""

    members: list[ClusterMember]
    settled: Annotated[
        bool,
        Meta(
            description="no change of the membership is in the answering node's log uncommitted "
            "(a new master may still cut one that is, and this listing would go back)"
        ),
    ]


class Snapshot(Answer):
    """The last Raft snapshot this process wrote."""

    index: int
    seconds: float
    manifest_bytes: int
    store_bytes: int


class Wheel(Answer):
    tick: int
    local_index: int
    ms: int
    syncs_led: int
    last_sync_led_ms: int | None


Counters = msgspec.defstruct("Counters", [(k, int) for k in COUNTERS], bases=(Answer,))


class Retention(Answer):
    retention_ms: int
    retained_from_hour: int
    cuts_proposed: int


class Peer(Answer):
    """Another node of the cluster, as this one knows it."""

    node_id: str
    raft: str
    http: Annotated[str, Meta(description="URL of its API, scheme included")]
    connected: bool


class Status(Answer):
    node_id: str
    pid: int
    role: Literal["master", "follower", "candidate"]
    leader: str | None
    term: int
    commit_index: int
    applied_index: int
    raft_log_bytes: int
    snapshot: Annotated[Snapshot | None, Meta(description="null before the first")]
    wheel: Wheel
    clock_ms: int
    clock_offset_ms: int | None
    clock_handovers: int
    pending: int
    counters: Counters
    peers: list[Peer]
    halted: Annotated[str | None, Meta(description="why this node stopped applying")]
    skipped_entries: int
    retention: Retention


class Readiness(Answer):
    ready: bool
    leader: str | None
    halted: str | None
    links: dict[str, bool]
    peers: Annotated[
        dict[str, str],
        Meta(description="the Raft address of each peer this node dials, by id: the only nodes it links to"),
    ]
    clock: Annotated[bool, Meta(description="a majority's clock readings are in")]
    node_id: Annotated[str, Meta(description="this node's id, as its config names it")]
    raft: Annotated[str, Meta(description="this node's Raft address, as its config names it")]
    join: Annotated[bool, Meta(description="this node was started to join a running cluster")]
    applied_index: Annotated[int, Meta(description="the Raft index up to which this node applied the log")]
    applied_term: Annotated[int, Meta(description="the term of the entry at applied_index (0: none)")]


BucketSize = Literal["1m", "1h", "1d"]  # components/schemas/BucketSize: schemas.py


class BucketCount(Answer):
    """How many pending messages fall due in the bucket that begins at `start`."""

    start: EpochMs
    count: Count


class Forecast(Answer):
    bucket: BucketSize
    topic: Annotated[str | None, Meta(description="null: every topic")]
    before: Annotated[int, Meta(ge=0, description="pending due before the first bucket")]
    buckets: list[BucketCount]


class PendingMessage(Content):
    id: MessageId
    deliver_at: EpochMs
    fires_at: Annotated[EpochMs, Meta(description="when the wheel delivers it")]
    key: ProducerKey | UnsetType = UNSET


class PendingList(Answer):
    messages: list[PendingMessage]
    next_cursor: Annotated[str | None, Meta(description="null on the last page")]


class DlqMessage(Answer):
    position: Annotated[int, Meta(ge=0, description="in the DLQ's ready log")]
    id: MessageId
    deliver_at: EpochMs
    delivered_at: EpochMs
    expired: (
        Annotated[bool, Meta(description="retention removed its data", extra_json_schema={"const": True})]
        | UnsetType
    ) = UNSET
    topic: str | UnsetType = UNSET
    attempt: Count | UnsetType = UNSET
    key: ProducerKey | UnsetType = UNSET
    tags: list[str] | UnsetType = UNSET
    headers: dict[str, str] | UnsetType = UNSET
    body: str | UnsetType = UNSET
    body_b64: Annotated[str, Meta(description="when the body is not UTF-8")] | UnsetType = UNSET


class DlqPeek(Answer):
    group: Name
    messages: list[DlqMessage]
    next_after: Annotated[int | None, Meta(description="give as `after`; null at the end")]
    unacked: Count


class RequeuedMessage(Answer):
    """A dead-letter entry produced again: `new_id` is the message made from it."""

    id: MessageId
    position: Annotated[int, Meta(ge=0, description="in the DLQ's ready log")]
    topic: str
    new_id: MessageId


class Requeued(Answer):
    requeued: list[RequeuedMessage]
    expired: list[MessageId]
    leased: Annotated[
        list[MessageId],
        Meta(description="entries a consumer of the DLQ holds now (a lease of the group): left to it"),
    ]
    missing: list[MessageId]
    remaining: Count


class Health(Answer):
    ok: Annotated[bool, Meta(extra_json_schema={"const": True})]


class Schedule(Content):
    name: Name
    topic: Name
    cron: str
    timezone: str
    state: Annotated[
        Literal["active", "paused", "ended"],
        Meta(description="`ended`: `end_at` is set and no fire time is left before it"),
    ]
    start_at: int | None
    end_at: int | None
    created_at: Annotated[EpochMs, Meta(description="the master's clock in the entry that created it")]
    planned_until: Annotated[
        int | None,
        Meta(
            description="the replicated mark: every fire time up to it was produced (or skipped while "
            "paused); planning goes on from it"
        ),
    ]
    next_fires: Annotated[
        list[EpochMs], Meta(max_length=5, description="the next five fire times after now; none while paused")
    ]


class ScheduleList(Answer):
    schedules: list[Schedule]


class ScheduleDeleted(Answer):
    name: Name
    state: Literal["deleted"]


class PushShown(Answer):
    """As put, without the secret."""

    url: str
    timeout_ms: int
    max_in_flight: int
    rate_per_s: int
    tags: str


class PushCounters(Answer):
    """What this master pushed since it became master: acked on a 2xx, nacked to a retry level,
    moved to the DLQ; requests open now."""

    delivered: Count
    retried: Count
    dead_lettered: Count
    in_flight: Count


class Subscription(Answer):
    topic: Name
    group: Name
    push: PushShown
    allowed: Annotated[
        bool, Meta(description="whether this master's `push_allow` may push to the URL (nodes may differ)")
    ]
    created_at: EpochMs
    updated_at: EpochMs
    counters: PushCounters
    unacked: Annotated[
        int, Meta(ge=0, description="messages of the topic's ready log the group has not acked: the backlog")
    ]


class SubscriptionDeleted(Answer):
    topic: Name
    group: Name
    state: Literal["deleted"]


class ErrorDetail(Answer):
    code: Annotated[str, Meta(description="what went wrong, e.g. `invalid_field`")]
    message: str
    field: Annotated[str, Meta(description="the request field at fault, when one is")] | UnsetType = UNSET


class Error(Answer):
    error: ErrorDetail


class Unavailable(Error):
    leader: (
        Annotated[str | None, Meta(description="the master's node id once one is known; null while none is")]
        | UnsetType
    ) = UNSET


ANSWERS = (
    Scheduled, BatchScheduled, BatchResults, MessageStatus, Rescheduled, BatchRescheduled, RescheduleResults,
    Cancelled, Pulled, Acked, Nacked, LeasesReleased, Backlog, Purged, Extended, Released, Status, Readiness,
    Forecast, PendingList, DlqPeek, Requeued, Health, ScheduleList, ScheduleDeleted, Subscription,
    SubscriptionDeleted, Members, Error, Unavailable,
)  # fmt: skip
