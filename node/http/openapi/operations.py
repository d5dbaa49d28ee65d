"""What the operations of /openapi.json are made of: :func:`operation`, the shared
parameters and answers, the tags.

Each route declares its operation where its handler is (node/http/route_table.py):
``@routes.post("/v1/messages", operation(...))``. An operation has an operationId (the
function a generated client calls it by: a new snake_case verb and noun, never changed
once given), a tag (one of ``TAGS``), a summary, its scope (``CLIENT`` for ``/v1/*``,
``ADMIN`` for ``/admin/*``, ``PUBLIC`` for the routes the middleware lets through
unauthenticated), its request body and its answers. ``operation`` adds what the scope
and the master rule imply (401/403, 307/503/507), and 400/413 for a JSON body.
tests/node/test_openapi.py fails until the route's heading in docs/api.md exists, and
while two operations share an operationId or one has no tag of ``TAGS``. The route table
makes the master check of an operation with the master rule (:func:`on_master_only`).
"""

from __future__ import annotations

from horologe.cluster.consumer_groups import DLQ_PREFIX, RETRY_PREFIX
from horologe.storage.message_json import MAX_KEY, NAME_PATTERN

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
        "No master can serve it now (`no_master` during an election, when a master's read lease "
        "stayed lapsed for 300 ms or a halted master hands its place over, or when the master lost its place "
        "and Raft dropped the entry: nothing was done; `timeout` and `unavailable`: it may have "
        "taken effect); retry. Also `too_many_connections` past "
        "`http_max_connections`, and `store_damaged`: a read found this node's store damaged, and "
        "the node halted; another node serves.",
        "Unavailable",
    ),
    "Halted": _error(
        "`disk_full`: the master's disk is full (it halts, and hands its place over), or `halted`: "
        "this node stopped applying."
    ),
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


def response_doc(description: str, schema: str | None = None) -> dict:
    out: dict = {"description": description}
    if schema is not None:
        out["content"] = {JSON: {"schema": ref(schema)}}
    return out


def on_master_only(op: dict) -> bool:
    """Whether the operation has the master rule: a follower redirects it, and a master
    that may not serve now refuses it (NodeService.require_master)."""
    return STATUS["Redirect"] in op["responses"]


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
    if master:  # require_master(): a follower redirects, no master refuses; a full disk halts
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
NAMED = ("BadRequest", "NotFound")  # what an operation on a named schedule or subscription adds


def subscription_operation(operation_id: str, summary: str, ok: dict[str, dict]) -> dict:
    """An operation on one push subscription, named in the path."""
    return operation(operation_id, SUBSCRIPTIONS, summary, CLIENT, ok, parameters=SUBSCRIPTION, errors=NAMED)


def by_name_operation(operation_id: str, summary: str, ok: dict[str, dict]) -> dict:
    """An operation on one schedule, named in the path."""
    return operation(operation_id, SCHEDULES, summary, CLIENT, ok, parameters=(SCHEDULE,), errors=NAMED)


def reschedule_operation(operation_id: str, summary: str, parameters: tuple[dict, ...]) -> dict:
    moved = response_doc(
        "Moved: it will be delivered at `deliver_at`, and never at its old time.", "Rescheduled"
    )
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
