"""The request rules of ``/v1/schedules`` (DESIGN §6, Schedule management), refusing with
the API's error shape before anything is proposed: a refused request never reaches the
Raft log.

A schedule's message fields (``topic``, ``body``/``body_b64``, ``tags``, ``headers``)
follow the very rules of ``POST /v1/messages`` (storage/message_json.py), which keep
``x-horologe-*`` headers for the node, less one header's room: each firing carries
``x-horologe-schedule: <name>`` besides the schedule's own.
"""

from __future__ import annotations

from horologe.cluster.errors import InvalidScheduleError
from horologe.cluster.schedule_state import ScheduleDef
from horologe.cluster.schedule_times import LAST_INSTANT_MS, check_cron, time_zone
from horologe.storage import message_json
from horologe.storage.message import MessageLimits
from horologe.storage.message_json import MAX_HEADERS, TOPIC_RE, json_object, parse_instant, refusal

from .messages import answered_over_http

MESSAGE_FIELDS = ("topic", "body", "body_b64", "tags", "headers")
FIELDS = {*MESSAGE_FIELDS, "name", "cron", "timezone", "start_at", "end_at"}
MAX_SCHEDULE_HEADERS = MAX_HEADERS - 1  # room for SCHEDULE_HEADER
NAME_RULE = "1-128 of A-Z a-z 0-9 . _ - (not starting with . _ -)"


@answered_over_http
def parse_schedule(obj, now_ms: int, limits: MessageLimits) -> ScheduleDef:
    """A create's body as the definition to propose (not yet created: no clock, no incarnation)."""
    obj = json_object(obj, FIELDS, "a schedule")
    name = parse_name(obj.get("name"))
    msg = message_json.parse_message({k: obj[k] for k in MESSAGE_FIELDS if k in obj}, now_ms, limits)
    if len(msg.headers) > MAX_SCHEDULE_HEADERS:
        raise refusal(f"a schedule takes up to {MAX_SCHEDULE_HEADERS} headers", "headers")
    for field in ("cron", "timezone"):
        if field not in obj:
            raise refusal(f"{field} is required", field)
    try:
        check_cron(obj["cron"])
        time_zone(obj["timezone"])
    except InvalidScheduleError as e:
        raise refusal(e.message, e.field, e.code) from e
    start, end = _instant(obj, "start_at"), _instant(obj, "end_at")
    if start is not None and end is not None and end <= start:
        raise refusal("end_at must lie after start_at", "end_at", "invalid_range")
    return ScheduleDef(
        name, msg.topic, msg.body, obj["cron"], obj["timezone"], msg.tags, msg.headers, start, end
    )


@answered_over_http
def parse_name(name) -> str:
    """A schedule's name: the rule of topic names."""
    if not isinstance(name, str) or not TOPIC_RE.fullmatch(name):
        raise refusal(f"name must be {NAME_RULE}", "name")
    return name


def _instant(obj: dict, field: str) -> int | None:
    if field not in obj:
        return None
    ms = parse_instant(obj[field], field)
    if not 0 <= ms <= LAST_INSTANT_MS:
        raise refusal(f"{field} must lie between 1970 and the end of 9999", field, "out_of_range")
    return ms
