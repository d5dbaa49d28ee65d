"""The request rules of ``/v1/schedules`` (DESIGN §6, Schedule management), refusing with
the API's error shape before anything is proposed: a refused request never reaches the
Raft log.

A schedule's message fields (``topic``, ``body``/``body_b64``, ``tags``, ``headers``)
follow the very rules of ``POST /v1/messages`` (storage/message_json.py), which keep
``x-horologe-*`` headers for the node, less one header's room: each firing carries
``x-horologe-schedule: <name>`` besides the schedule's own.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import UNSET, Meta, UnsetType

from horologe.cluster.errors import InvalidScheduleError
from horologe.cluster.schedule_state import SCHEDULE_HEADER, ScheduleDef
from horologe.cluster.schedule_times import (
    CRON_PATTERN,
    LAST_INSTANT_MS,
    MAX_CRON_LENGTH,
    check_cron,
    time_zone,
)
from horologe.storage import message_json
from horologe.storage.message import MessageLimits
from horologe.storage.message_json import MAX_HEADERS, name_field, parse_instant, refusal

from .messages import answered_over_http
from .model import (
    Body,
    BodyB64,
    DateTime,
    HeaderName,
    HeaderValue,
    MessageBody,
    Name,
    Tags,
    decode,
    matching,
)

MESSAGE_FIELDS = ("topic", "body", "body_b64", "tags", "headers")
MAX_SCHEDULE_HEADERS = MAX_HEADERS - 1  # room for SCHEDULE_HEADER


Instant = (
    Annotated[int, Meta(ge=0, le=LAST_INSTANT_MS, description="Unix epoch milliseconds, up to year 9999")]
    | DateTime
)


class NewSchedule(Body):
    """A recurring schedule: each fire time of `cron` in `timezone` produces a message to `topic`,
    keyed `schedule:<name>:<fire epoch ms>`. Exactly one of `body` and `body_b64`. A `cron` that never
    fires is 422; a `timezone` that is not an IANA zone name is 400."""

    name: Name
    topic: Name
    cron: Annotated[
        str,
        matching(
            CRON_PATTERN,
            max_length=MAX_CRON_LENGTH,
            description="5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first, one "
            "space apart; croniter's syntax, without `H` and `R`",
            examples=["*/5 * * * *", "0 30 9 * * MON-FRI"],
        ),
    ]
    timezone: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=64,
            description="an IANA zone name, e.g. `Europe/Berlin` or `UTC`",
            examples=["Europe/Berlin", "UTC"],
        ),
    ]
    # The message fields, checked again by POST /v1/messages' own rules (message_json).
    body: MessageBody | UnsetType = UNSET
    body_b64: BodyB64 | UnsetType = UNSET
    tags: Tags | UnsetType = UNSET
    headers: (
        Annotated[
            dict[HeaderName, HeaderValue],
            Meta(
                max_length=MAX_SCHEDULE_HEADERS,
                description=f"each firing carries these, and `{SCHEDULE_HEADER}: <name>`",
            ),
        ]
        | UnsetType
    ) = UNSET
    start_at: Annotated[Instant, Meta(description="no fire time before it")] | UnsetType = UNSET
    end_at: (
        Annotated[Instant, Meta(description="fire times before it only; after `start_at`")] | UnsetType
    ) = UNSET


@answered_over_http
def parse_schedule(obj, now_ms: int, limits: MessageLimits) -> ScheduleDef:
    """A create's body as the definition to propose (not yet created: no clock, no incarnation)."""
    new = decode(NewSchedule, obj, "a schedule")
    msg = message_json.parse_message({k: obj[k] for k in MESSAGE_FIELDS if k in obj}, now_ms, limits)
    try:
        check_cron(new.cron)
        time_zone(new.timezone)
    except InvalidScheduleError as e:
        raise refusal(e.message, e.field, e.code) from e
    start, end = _instant(new.start_at, "start_at"), _instant(new.end_at, "end_at")
    if start is not None and end is not None and end <= start:
        raise refusal("end_at must lie after start_at", "end_at", "invalid_range")
    return ScheduleDef(
        new.name, msg.topic, msg.body, new.cron, new.timezone, msg.tags, msg.headers, start, end
    )


@answered_over_http
def parse_name(name) -> str:
    """A schedule's name: the rule of topic names."""
    return name_field({"name": name}, "name")


def _instant(value, field: str) -> int | None:
    if value is UNSET:
        return None
    ms = parse_instant(value, field)
    if not 0 <= ms <= LAST_INSTANT_MS:
        raise refusal(f"{field} must lie between 1970 and the end of 9999", field, "out_of_range")
    return ms
