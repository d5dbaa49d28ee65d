"""The operations of /openapi.json: one entry of ``ROUTES`` per route ``create_app`` registers.

A new route is one more entry: its method and path, its operationId (the function a
generated client calls it by: a new snake_case verb and noun, never changed once given),
its tag (one of ``TAGS``), a summary, its scope (``CLIENT`` for ``/v1/*``, ``ADMIN`` for
``/admin/*``, ``PUBLIC`` for the routes the middleware lets through unauthenticated), its
request body and its answers. ``operation`` adds what the scope and the master rule imply
(401/403, 307/503/507), and 400/413 for a JSON body. tests/node/test_openapi.py fails
until the route, its entry here and its heading in docs/api.md all exist, and while two
operations share an operationId or one has no tag of ``TAGS``.
"""

from __future__ import annotations

from horologe.cluster.consumer_groups import DLQ_PREFIX, RETRY_PREFIX
from horologe.storage.message_json import MAX_KEY, NAME_PATTERN

from ..rules.messages import MAX_POSITION
from .schemas import ref

JSON = "application/json"
CLIENT, ADMIN, PUBLIC = "clientToken", "adminToken", None

# The top-level tags: each operation is listed under one (a generated client's modules).
MESSAGES, PENDING, CONSUMERS = "messages", "pending", "consumers"
SUBSCRIPTIONS, SCHEDULES, DEAD_LETTERS = "subscriptions", "schedules", "dead-letters"
ADMIN_TAG, OPS, DASHBOARD_TAG = "admin", "ops", "dashboard"
TAGS = [
    {"name": MESSAGES, "description": "Schedule messages, read their state, cancel and reschedule them."},
    {
        "name": PENDING,
        "description": "What is scheduled and not yet delivered: counts per time bucket, and a topic's "
        "messages in the order they will fire.",
    },
    {
        "name": CONSUMERS,
        "description": "Consumer groups: lease due messages (pull), then ack them, or nack them to a retry "
        "level and, after the last, the group's dead-letter queue.",
    },
    {
        "name": SUBSCRIPTIONS,
        "description": "Push subscriptions: the master POSTs a group's messages, signed, to a URL.",
    },
    {
        "name": SCHEDULES,
        "description": "Recurring schedules: a message at each fire time of a cron expression, in a zone.",
    },
    {
        "name": DEAD_LETTERS,
        "description": "A group's dead-letter queue: browse it without leasing, and requeue entries "
        "(admin token).",
    },
    {
        "name": ADMIN_TAG,
        "description": "The node's status, handing mastership over, the cluster's membership, and "
        "backups (admin token).",
    },
    {
        "name": OPS,
        "description": "Unauthenticated: liveness, readiness, Prometheus metrics and this document.",
    },
    {"name": DASHBOARD_TAG, "description": "The web dashboard's page and files (docs/ui.md)."},
]


def _error(description: str, schema: str = "Error") -> dict:
    return {"description": description, "content": {JSON: {"schema": ref(schema)}}}


# components/responses: the error answers routes share.
RESPONSES = {
    "Redirect": {
        "description": "This node is not the master: the same request goes to the master's URL.",
        "headers": {"Location": {"required": True, "schema": {"type": "string", "format": "uri"}}},
    },
    "BadRequest": _error(
        "The request is malformed: `invalid_json` (not UTF-8 JSON, or NaN/Infinity/lone surrogates), "
        "`invalid_msgpack` (a produce body sent as `application/msgpack` that is not msgpack), "
        "`invalid_body`, `unknown_field`, `invalid_field` (a type or a rule; `field` names it), "
        "`invalid_query`, `invalid_receipt`, `conflicting_fields` (two parameters that exclude each other)."
    ),
    "Unauthorized": _error("`unauthorized`: no `Authorization: Bearer <token>` header."),
    "Forbidden": _error("`forbidden`: the token is not this API's (client for /v1, admin for /admin)."),
    "NotFound": _error("`not_found`: no such message, or `expired`: retention removed it."),
    "Conflict": _error(
        "`already_delivered`: it was delivered (or removed by retention) before; `cancelled`: a "
        "reschedule of a cancelled message."
    ),
    "TooLarge": _error(
        "`too_large`: the request body is over `max_request_bytes` (4 MiB by default), a message body "
        "over 256 KiB, or a batch over `max_batch_items`."
    ),
    "Unprocessable": _error(
        "`out_of_range`: a well-formed value outside what the server can take, e.g. a deliver time "
        "more than 400 days ahead of its clock or before the epoch."
    ),
    "Unavailable": _error(
        "No master can serve it now (`no_master` during an election, `timeout`, `unavailable`); retry. "
        "Also `too_many_connections` past `http_max_connections`.",
        "Unavailable",
    ),
    "Halted": _error("`halted`: the master stopped applying, or `disk_full`: its disk is full."),
    "NotCompleted": _error(
        "A change of the membership did not complete in time: `catch_up_failed` or `lost_lead` (nothing "
        "changed), `not_committed` (it may still be made: list the members before asking again)."
    ),
}
STATUS = {
    "Redirect": "307",
    "BadRequest": "400",
    "Unauthorized": "401",
    "Forbidden": "403",
    "NotFound": "404",
    "Conflict": "409",
    "TooLarge": "413",
    "Unprocessable": "422",
    "Unavailable": "503",
    "Halted": "507",
    "NotCompleted": "504",
}


def answer(description: str, schema: str | None = None) -> dict:
    out: dict = {"description": description}
    if schema is not None:
        out["content"] = {JSON: {"schema": ref(schema)}}
    return out


def operation(
    operation_id: str,
    tag: str,
    summary: str,
    scope: str | None,
    ok: dict[str, dict],
    *,
    body: str | None = None,
    body_required: bool = True,
    master: bool = True,
    errors: tuple[str, ...] = (),
    parameters: tuple[dict, ...] = (),
    description: str | None = None,
) -> dict:
    """One operation. ``ok``: its own answers by status; ``errors``: the names of ``RESPONSES``
    it answers beyond those its scope, the master rule and its body imply; ``operation_id``
    and ``tag`` as the module says."""
    names = set(errors)
    if scope:
        names |= {"Unauthorized", "Forbidden"}
    if master:  # require_master(): a follower redirects, and no master or a halted one refuses
        names |= {"Redirect", "Unavailable", "Halted"}
    if body is not None:
        names |= {"BadRequest", "TooLarge"}
    out: dict = {
        "operationId": operation_id,
        "tags": [tag],
        "summary": summary,
        "security": [{scope: []}] if scope else [],
        "responses": {
            **ok,
            **{
                STATUS[name]: {"$ref": f"#/components/responses/{name}"}
                for name in sorted(names, key=STATUS.get)
            },
        },
    }
    if description:
        out["description"] = description
    if parameters:
        out["parameters"] = list(parameters)
    if body is not None:
        out["requestBody"] = {"required": body_required, "content": {JSON: {"schema": ref(body)}}}
    return out


def path_param(name: str, schema: dict, description: str = "") -> dict:
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": description}


def query_param(name: str, schema: dict, required: bool = True) -> dict:
    return {"name": name, "in": "query", "required": required, "schema": schema}


MESSAGE_ID = path_param("id", ref("MessageId"), "as answered when it was scheduled")
TOPIC = path_param(
    "topic",
    {"anyOf": [ref("Name"), {"type": "string", "pattern": f"^{DLQ_PREFIX}{NAME_PATTERN}$"}]},
    "a topic, or `%DLQ%<group>`: the dead-letter queue of the body's `group` (no other group's)",
)

PENDING_TOPIC = {
    "anyOf": [ref("Name"), {"type": "string", "pattern": f"^{RETRY_PREFIX}{NAME_PATTERN}$"}],
    "description": "a topic, or a group's retries `%RETRY%<group>`",
}
INSTANT = {
    "type": "string",
    "allOf": [{"anyOf": [{"pattern": "^[0-9]{1,16}$"}, {"format": "date-time"}]}],  # a str, when generated
    "description": "epoch ms, or ISO-8601 with a zone (`+` written `%2B`)",
}
KEY_QUERY = (
    query_param("topic", ref("Name")),
    query_param("key", {"type": "string", "minLength": 1, "maxLength": MAX_KEY}),
)
GROUP = path_param("group", ref("Name"), "a consumer group")
SCHEDULE = path_param("name", ref("Name"), "a recurring schedule's name")


SUBSCRIPTION = (
    path_param("topic", ref("Name"), "a topic"),
    path_param("group", ref("Name"), "the consumer group pushed to the URL"),
)


def _named(operation_id: str, tag: str, summary: str, ok: dict[str, dict], path: tuple[dict, ...]) -> dict:
    """An operation on one schedule or push subscription, named by ``path``."""
    return operation(
        operation_id,
        tag,
        summary,
        CLIENT,
        ok,
        parameters=path,
        errors=("BadRequest", "NotFound"),
    )


def _subscription(operation_id: str, summary: str, ok: dict[str, dict]) -> dict:
    """An operation on one push subscription, named in the path."""
    return _named(operation_id, SUBSCRIPTIONS, summary, ok, SUBSCRIPTION)


def _by_name(operation_id: str, summary: str, ok: dict[str, dict]) -> dict:
    """An operation on one schedule, named in the path."""
    return _named(operation_id, SCHEDULES, summary, ok, (SCHEDULE,))


DASHBOARD = {
    "200": {
        "description": "The file: the page (`text/html`), its script, style or images.",
        "content": {t: {"schema": {"type": "string"}} for t in ("text/html", "text/javascript", "text/css")},
    },
    "404": {"$ref": "#/components/responses/NotFound"},
}


def _reschedule(operation_id: str, summary: str, parameters: tuple[dict, ...]) -> dict:
    moved = answer("Moved: it will be delivered at `deliver_at`, and never at its old time.", "Rescheduled")
    return operation(
        operation_id,
        MESSAGES,
        summary,
        CLIENT,
        {"200": moved},
        body="NewTime",
        parameters=parameters,
        errors=("NotFound", "Conflict", "Unprocessable"),
    )


MSGPACK_BODY = (
    "The body may also be msgpack (`Content-Type: application/msgpack`), the same map, where "
    "`body` may be raw bytes (bin) instead of `body_b64`; the same rules and errors apply."
)

ROUTES: dict[tuple[str, str], dict] = {
    ("post", "/v1/messages"): operation(
        "produce_message",
        MESSAGES,
        "Schedule one message",
        CLIENT,
        {"201": answer("Stored on a majority; it will be delivered at `deliver_at`.", "Scheduled")},
        body="Message",
        errors=("Unprocessable",),
        description=MSGPACK_BODY,
    ),
    ("post", "/v1/messages/batch"): operation(
        "produce_messages",
        MESSAGES,
        "Schedule many messages; one result per item, in order",
        CLIENT,
        {"200": answer("Valid items stored; invalid ones answered by their error.", "BatchResults")},
        body="Batch",
        description=MSGPACK_BODY,
    ),
    ("get", "/v1/messages/{id}"): operation(
        "get_message",
        MESSAGES,
        "A message's state: scheduled, delivered or cancelled",
        CLIENT,
        {"200": answer("The message's state.", "MessageStatus")},
        parameters=(MESSAGE_ID,),
        errors=("NotFound",),
    ),
    ("delete", "/v1/messages/{id}"): operation(
        "cancel_message",
        MESSAGES,
        "Cancel a scheduled message",
        CLIENT,
        {"200": answer("Cancelled (now, or before).", "Cancelled")},
        parameters=(MESSAGE_ID,),
        errors=("NotFound", "Conflict"),
    ),
    ("delete", "/v1/messages"): operation(
        "cancel_message_by_key",
        MESSAGES,
        "Cancel a scheduled message by its producer key",
        CLIENT,
        {"200": answer("Cancelled (now, or before).", "Cancelled")},
        parameters=KEY_QUERY,
        errors=("BadRequest", "NotFound", "Conflict"),
    ),
    ("patch", "/v1/messages/{id}"): _reschedule(
        "reschedule_message", "Reschedule a message; its id stays", (MESSAGE_ID,)
    ),
    ("patch", "/v1/messages"): _reschedule(
        "reschedule_message_by_key", "Reschedule a message by its producer key", KEY_QUERY
    ),
    ("post", "/v1/messages/reschedule"): operation(
        "reschedule_messages",
        MESSAGES,
        "Reschedule many messages, by id or key; one result per item, in order",
        CLIENT,
        {
            "200": answer(
                "Items that named a scheduled message moved; the others answered by their error.",
                "RescheduleResults",
            )
        },
        body="RescheduleBatch",
    ),
    ("get", "/v1/forecast"): operation(
        "get_forecast",
        PENDING,
        "Pending messages per time bucket, from the hour indexes",
        CLIENT,
        {"200": answer("Counts per bucket, to the second of each message's slot.", "Forecast")},
        parameters=(
            query_param("topic", PENDING_TOPIC, required=False),
            query_param("bucket", ref("BucketSize"), required=False),
            query_param("from", INSTANT, required=False),
            query_param("to", INSTANT, required=False),
        ),
        errors=("BadRequest", "Unprocessable"),
        description="400 `invalid_range` when `to` is not after `from`; 422 `out_of_range` past 10,000 "
        "buckets. `from` and `to` as ISO-8601 are read by Python's `datetime.fromisoformat`: a leap "
        "second or more than six decimals is refused (400 `invalid_field`).",
    ),
    ("get", "/v1/topics/{topic}/pending"): operation(
        "list_pending_messages",
        PENDING,
        "A topic's pending messages in the order they will fire, a page at a time",
        CLIENT,
        {"200": answer("A page; `next_cursor` goes on from its end.", "PendingList")},
        parameters=(
            path_param("topic", PENDING_TOPIC),
            query_param("from", INSTANT, required=False),
            query_param("to", INSTANT, required=False),
            query_param("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, required=False),
            query_param("cursor", {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}, required=False),
            query_param("with_body", {"enum": ["true", "false"]}, required=False),
            query_param("key", {"type": "string", "minLength": 1, "maxLength": MAX_KEY}, required=False),
        ),
        errors=("BadRequest", "Unprocessable"),
        description="400 `invalid_range` when `to` is not after `from`; 400 `invalid_field` on `cursor` "
        "for a cursor this API did not give out. `key` looks up the one message of that producer key "
        "instead: `messages` holds it while it is scheduled (under its original id, at its new time once "
        "rescheduled), else nothing, and `next_cursor` is null; `key` with `cursor`, `from` or `to` is "
        "400 `conflicting_fields`.",
    ),
    ("post", "/v1/topics/{topic}/pull"): operation(
        "pull_messages",
        CONSUMERS,
        "Lease up to `max` messages of the topic to this consumer of the group",
        CLIENT,
        {
            "200": {
                "description": "The messages leased (none once `wait_ms` passed without any). With "
                "`Accept: application/msgpack; layout=columns`, the same in msgpack by columns, each "
                "record flat; with `Accept: application/msgpack`, by messages, each as its stored "
                "record (docs/api.md, pull).",
                "content": {JSON: {"schema": ref("Pulled")}, "application/msgpack": {"schema": {}}},
            }
        },
        body="Pull",
        parameters=(TOPIC,),
        errors=("Unprocessable",),
    ),
    ("get", "/v1/topics/{topic}/groups/{group}"): operation(
        "get_backlog",
        CONSUMERS,
        "A group's backlog on the topic: unacked, of those leased, and waiting for a pull",
        CLIENT,
        {"200": answer("The group's counts, by the master's leases and clock.", "Backlog")},
        parameters=(path_param("topic", ref("Name"), "a topic"), GROUP),
        errors=("BadRequest",),
    ),
    ("post", "/v1/topics/{topic}/purge"): operation(
        "purge_messages",
        CONSUMERS,
        "Ack every due message the group has not acked and no consumer holds (a task queue's purge)",
        CLIENT,
        {"200": answer("How many messages were acked.", "Purged")},
        body="Group",
        parameters=(TOPIC,),
        description="Leased messages stay with their consumers (their receipts still ack them), and "
        "messages not yet due stay scheduled; only this group's progress moves. There is no undo.",
    ),
    ("post", "/v1/topics/{topic}/ack"): operation(
        "ack_messages",
        CONSUMERS,
        "Acknowledge leased messages: never handed out again, even after a failover",
        CLIENT,
        {"200": answer("How many messages the receipts name, each once.", "Acked")},
        body="Receipts",
        parameters=(TOPIC,),
    ),
    ("post", "/v1/topics/{topic}/nack"): operation(
        "nack_messages",
        CONSUMERS,
        "Give leased messages back: retried at the next retry level, or dead-lettered after the last",
        CLIENT,
        {"200": answer("What the entry did: copies made, and messages moved to the DLQ.", "Nacked")},
        body="Nack",
        parameters=(TOPIC,),
        errors=("NotFound",),
    ),
    ("post", "/v1/topics/{topic}/release"): operation(
        "release_leases",
        CONSUMERS,
        "Give leased messages back now, no attempt counted: handed out again at once",
        CLIENT,
        {"200": answer("How many messages these receipts still held a lease on.", "LeasesReleased")},
        body="Receipts",
        parameters=(TOPIC,),
    ),
    ("post", "/v1/topics/{topic}/extend"): operation(
        "extend_leases",
        CONSUMERS,
        "Renew leases these receipts still hold to visibility_ms from now; the receipts stay good",
        CLIENT,
        {"200": answer("How many leases were renewed, and until when.", "Extended")},
        body="Extend",
        parameters=(TOPIC,),
        errors=("Unprocessable",),
    ),
    ("post", "/v1/schedules"): operation(
        "create_schedule",
        SCHEDULES,
        "Create a recurring schedule: a message to its topic at every fire time of its cron, in its zone",
        CLIENT,
        {
            "201": answer("Created; firings are planned from now (or from `start_at`).", "Schedule"),
            "200": answer(
                "A schedule of that name and the same definition exists (a create retried).", "Schedule"
            ),
        },
        body="NewSchedule",
        errors=("Conflict", "Unprocessable"),
        description="409 `schedule_exists` (the name taken by another definition) or `too_many_schedules`; "
        "400 `invalid_field` on `cron` or `timezone`, `invalid_range` when `end_at` is not after `start_at`; "
        "422 `out_of_range`: a cron that never fires, a time before 1970 or past 9999.",
    ),
    ("get", "/v1/schedules"): operation(
        "list_schedules",
        SCHEDULES,
        "Every recurring schedule, by name",
        CLIENT,
        {"200": answer("Each with its next five fire times.", "ScheduleList")},
    ),
    ("get", "/v1/schedules/{name}"): _by_name(
        "get_schedule",
        "A recurring schedule, with its next five fire times",
        {"200": answer("The schedule.", "Schedule")},
    ),
    ("post", "/v1/schedules/{name}/pause"): _by_name(
        "pause_schedule",
        "Pause a schedule: nothing more is planned, and its firings not yet delivered are cancelled",
        {"200": answer("Paused (now, or before).", "Schedule")},
    ),
    ("post", "/v1/schedules/{name}/resume"): _by_name(
        "resume_schedule",
        "Resume a schedule: planned again from now; what passed while paused is skipped",
        {"200": answer("Active (now, or before).", "Schedule")},
    ),
    ("delete", "/v1/schedules/{name}"): _by_name(
        "delete_schedule",
        "Delete a schedule; its firings not yet delivered are cancelled",
        {"200": answer("Deleted.", "ScheduleDeleted")},
    ),
    ("put", "/v1/topics/{topic}/subscriptions/{group}"): operation(
        "put_subscription",
        SUBSCRIPTIONS,
        "Make the group a push group of the topic: its messages are POSTed, signed, to `push.url`",
        CLIENT,
        {
            "201": answer("Created; the master starts pushing.", "Subscription"),
            "200": answer("Replaced (pushing starts over with it), or the same again.", "Subscription"),
        },
        body="NewSubscription",
        parameters=SUBSCRIPTION,
        errors=("Conflict", "Unprocessable"),
        description="422 `push_target_not_allowed`: the URL's host is not in the master's node config "
        "`push_allow` (empty by default: nothing may be pushed until an operator allows a target); "
        "400 `invalid_field` on `push.url` for a URL the pattern lets through that is no URL (a port "
        "out of range, a user or password); 409 `too_many_subscriptions` past 1,000.",
    ),
    ("get", "/v1/topics/{topic}/subscriptions/{group}"): _subscription(
        "get_subscription",
        "A push subscription, without its secret, with the master's counters",
        {"200": answer("The subscription.", "Subscription")},
    ),
    ("delete", "/v1/topics/{topic}/subscriptions/{group}"): _subscription(
        "delete_subscription",
        "Stop pushing the group; its progress stays",
        {"200": answer("Deleted.", "SubscriptionDeleted")},
    ),
    ("get", "/admin/status"): operation(
        "get_status",
        ADMIN_TAG,
        "This node's role, Raft indexes, wheel state and counters",
        ADMIN,
        {"200": answer("This node's view.", "Status")},
        master=False,
    ),
    ("post", "/admin/release-master"): operation(
        "release_master",
        ADMIN_TAG,
        "Make the master hand over, optionally to a named node",
        ADMIN,
        {"200": answer("Handed over; the linked nodes follow the new master.", "Released")},
        body="Release",
        body_required=False,
        errors=("Conflict", "Unprocessable"),
        description="409 `no_linked_target` (no peer linked to every node) or `release_in_progress`; "
        "422 `unknown_node`; 503 `transfer_failed` or `transfer_unconfirmed`.",
    ),
    ("get", "/admin/cluster/members"): operation(
        "list_members",
        ADMIN_TAG,
        "The cluster's members as this node's Raft log has them",
        ADMIN,
        {"200": answer("This node first, then the others by id.", "Members")},
        master=False,
    ),
    ("post", "/admin/cluster/members"): operation(
        "add_member",
        ADMIN_TAG,
        "Add a node started to join: fed the log until caught up, then committed as a member",
        ADMIN,
        {"200": answer("It is a member: the membership now.", "Members")},
        body="NewMember",
        errors=("Conflict", "NotCompleted"),
        description="409 `member_exists` (its id or an address is a member's), `not_reachable` (nothing "
        "answers at its `http` address: start it first), `change_under_way` or "
        "`change_refused` (another change is not committed yet: retry); 504 `catch_up_failed` (it did not "
        "catch up within `catch_up_s`: is it running with `join = true`, reachable at its Raft address?) "
        "or `lost_lead` (nothing changed), `not_committed` (it may still be made: list the members).",
    ),
    ("delete", "/admin/cluster/members/{node_id}"): operation(
        "remove_member",
        ADMIN_TAG,
        "Remove a member; the master itself is released first (409 `is_master`)",
        ADMIN,
        {"200": answer("It is no longer a member: the membership now.", "Members")},
        errors=("Conflict", "Unprocessable", "NotCompleted"),
        parameters=(path_param("node_id", {"type": "string"}, "the member's node id"),),
        description="409 `is_master` (release the master first), `would_lose_quorum` (the members left "
        "that the master hears make no majority of them), `change_under_way` or `change_refused`; "
        "422 `unknown_node`; 504 `lost_lead` (nothing changed) or `not_committed` (it may still be made: "
        "list the members).",
    ),
    ("get", "/admin/backup"): operation(
        "get_backup",
        ADMIN_TAG,
        "A consistent copy of this node's store, as a tar (`horologe backup`)",
        ADMIN,
        {
            "200": {
                "description": "A tar (sent as `application/octet-stream`): `store/commits.log`, every "
                "store file up to its committed length, then `backup.json` with the Raft index and "
                "term and every file's SHA-256 "
                "(docs/deploy.md, Backup and restore). Header `Horologe-Backup-Index` names the "
                "Raft index, `Horologe-Backup-Bytes` what the files weigh.",
                "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            }
        },
        master=False,
        errors=("Conflict", "Halted"),
        description="Any node sends one, a follower as well as the master, and goes on serving. "
        "409 `backup_in_progress` (one at a time per node) or `nothing_to_back_up` (fewer than "
        "two Raft entries applied); 507 `halted`.",
    ),
    ("get", "/admin/dlq/{group}"): operation(
        "peek_dead_letters",
        DEAD_LETTERS,
        "A group's dead-letter entries not yet acked, oldest first, without leasing them",
        ADMIN,
        {"200": answer("Up to `limit` entries past `after`.", "DlqPeek")},
        parameters=(
            GROUP,
            query_param("after", {"type": "integer", "minimum": 0, "maximum": MAX_POSITION}, required=False),
            query_param("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, required=False),
        ),
        errors=("BadRequest", "Unprocessable"),
    ),
    ("post", "/admin/dlq/{group}/requeue"): operation(
        "requeue_dead_letters",
        DEAD_LETTERS,
        "Produce dead-letter entries again to their topics, due now, then ack them in the DLQ",
        ADMIN,
        {"200": answer("What was moved, and what was not found or had expired.", "Requeued")},
        body="Requeue",
        parameters=(GROUP,),
    ),
    ("get", "/ui"): operation(
        "get_dashboard",
        DASHBOARD_TAG,
        "The dashboard (docs/ui.md)",
        PUBLIC,
        DASHBOARD,
        master=False,
    ),
    ("get", "/ui/{file}"): operation(
        "get_dashboard_file",
        DASHBOARD_TAG,
        "The dashboard's files",
        PUBLIC,
        DASHBOARD,
        master=False,
        parameters=(
            path_param(
                "file",
                {"type": "string", "pattern": "^[A-Za-z0-9._/-]{1,128}$"},
                "a file of it, e.g. `app.js`",
            ),
        ),
    ),
    ("get", "/healthz"): operation(
        "get_health",
        OPS,
        "The process is up",
        PUBLIC,
        {"200": answer("Up.", "Health")},
        master=False,
    ),
    ("get", "/readyz"): operation(
        "get_readiness",
        OPS,
        "Ready: a master is known, this node applies, is linked to a quorum and knows its clocks",
        PUBLIC,
        {
            "200": answer("Ready.", "Readiness"),
            "503": answer("Not ready; the fields say why.", "Readiness"),
        },
        master=False,
    ),
    ("get", "/metrics"): operation(
        "get_metrics",
        OPS,
        "This node's Prometheus metrics",
        PUBLIC,
        {
            "200": {
                "description": "Prometheus text format 0.0.4.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        },
        master=False,
    ),
    ("get", "/openapi.json"): operation(
        "get_openapi",
        OPS,
        "This document",
        PUBLIC,
        {"200": {"description": "OpenAPI 3.1.", "content": {JSON: {"schema": {"type": "object"}}}}},
        master=False,
    ),
}
