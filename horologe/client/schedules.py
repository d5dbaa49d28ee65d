"""Recurring schedules in the SDK: ``client.create_schedule(...)``, ``schedule``,
``schedules``, ``pause_schedule``, ``resume_schedule``, ``delete_schedule`` (docs/api.md,
"Recurring schedules"), for :class:`~horologe.client.Client` and, awaitable, for
:class:`~horologe.client.AsyncClient`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from urllib.parse import quote

from .core import tag_list


@dataclass(frozen=True)
class Schedule:
    """A recurring schedule as the cluster holds it."""

    name: str
    topic: str
    cron: str
    timezone: str
    state: str  # active | paused | ended
    body: bytes
    tags: tuple[str, ...]
    headers: dict[str, str]
    start_at: int | None  # epoch ms
    end_at: int | None
    created_at: int
    planned_until: int | None  # every fire time up to it was produced (the replicated mark)
    next_fires: list[int]  # the next five fire times, epoch ms; none while paused

    @classmethod
    def from_json(cls, d: dict) -> Schedule:
        body = d["body"].encode() if "body" in d else base64.b64decode(d["body_b64"])
        return cls(
            d["name"],
            d["topic"],
            d["cron"],
            d["timezone"],
            d["state"],
            body,
            tuple(d["tags"]),
            d["headers"],
            d["start_at"],
            d["end_at"],
            d["created_at"],
            d["planned_until"],
            list(d["next_fires"]),
        )


def schedule_body(
    name: str,
    topic: str,
    body: bytes | str,
    cron: str,
    timezone: str,
    tags=(),
    headers: dict | None = None,
    start_at: int | str | None = None,
    end_at: int | str | None = None,
) -> dict:
    out: dict = {"name": name, "topic": topic, "cron": cron, "timezone": timezone}
    if isinstance(body, str):
        out["body"] = body
    else:
        out["body_b64"] = base64.b64encode(body).decode()
    if tags:
        out["tags"] = tag_list(tags)
    if headers:
        out["headers"] = headers
    for field, value in (("start_at", start_at), ("end_at", end_at)):
        if value is not None:
            out[field] = value
    return out


def path(name: str, action: str = "") -> str:
    return f"/v1/schedules/{quote(name, safe='')}{action}"


class ScheduleCalls:
    """The schedule calls of the blocking client (it supplies ``_call``)."""

    def create_schedule(
        self, name: str, topic: str, body: bytes | str, cron: str, timezone: str = "UTC", **options
    ) -> Schedule:
        """Create a schedule that sends ``body`` to ``topic`` at every fire time of ``cron``
        (5 fields, or 6 with seconds first) in ``timezone`` (IANA, e.g. ``Europe/Berlin``).
        Options: tags, headers, start_at, end_at (epoch ms or ISO-8601). Creating the same
        definition again returns it; another one under a taken name raises ConflictError."""
        wire = schedule_body(name, topic, body, cron, timezone, **options)
        return Schedule.from_json(self._call("POST", "/v1/schedules", wire))

    def schedule(self, name: str) -> Schedule:
        """One schedule, with its next five fire times; NotFoundError when there is none."""
        return Schedule.from_json(self._call("GET", path(name)))

    def schedules(self) -> list[Schedule]:
        """Every schedule, by name."""
        return [Schedule.from_json(d) for d in self._call("GET", "/v1/schedules")["schedules"]]

    def pause_schedule(self, name: str) -> Schedule:
        """Stop planning; firings planned and not yet delivered are cancelled."""
        return Schedule.from_json(self._call("POST", path(name, "/pause")))

    def resume_schedule(self, name: str) -> Schedule:
        """Plan again from now; what passed while paused is skipped."""
        return Schedule.from_json(self._call("POST", path(name, "/resume")))

    def delete_schedule(self, name: str) -> None:
        """Delete it, cancelling its firings not yet delivered; not resent after a timeout."""
        self._call("DELETE", path(name), resend=False)


class AsyncScheduleCalls:
    """The schedule calls of the asyncio client: see :class:`ScheduleCalls`."""

    async def create_schedule(
        self, name: str, topic: str, body: bytes | str, cron: str, timezone: str = "UTC", **options
    ) -> Schedule:
        wire = schedule_body(name, topic, body, cron, timezone, **options)
        return Schedule.from_json(await self._call("POST", "/v1/schedules", wire))

    async def schedule(self, name: str) -> Schedule:
        return Schedule.from_json(await self._call("GET", path(name)))

    async def schedules(self) -> list[Schedule]:
        return [Schedule.from_json(d) for d in (await self._call("GET", "/v1/schedules"))["schedules"]]

    async def pause_schedule(self, name: str) -> Schedule:
        return Schedule.from_json(await self._call("POST", path(name, "/pause")))

    async def resume_schedule(self, name: str) -> Schedule:
        return Schedule.from_json(await self._call("POST", path(name, "/resume")))

    async def delete_schedule(self, name: str) -> None:
        await self._call("DELETE", path(name), resend=False)
