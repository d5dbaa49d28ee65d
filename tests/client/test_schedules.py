"""The SDK's schedule calls on httpx's MockTransport: the requests they send, the answers
they read, and the errors they raise (horologe/client/schedules.py)."""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest

from horologe.client import AlreadyDeliveredError, AsyncClient, Client, ConflictError, NotFoundError

URL = "http://127.0.0.1:8081"
ANSWER = {
    "name": "nightly",
    "topic": "reports",
    "cron": "0 2 * * *",
    "timezone": "Europe/Berlin",
    "state": "active",
    "body_b64": "AAE=",
    "tags": ["a"],
    "headers": {},
    "start_at": None,
    "end_at": None,
    "created_at": 5,
    "planned_until": 5,
    "next_fires": [10, 20],
}


class Node:
    """Answers every call with ``answer`` (status, body) and records what it was sent."""

    def __init__(self, status: int = 200, body=ANSWER) -> None:
        self.status, self.body = status, body
        self.sent: list[tuple[str, str, object]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content) if request.content else None
        self.sent.append((request.method, request.url.path, body))
        return httpx.Response(self.status, json=self.body)


def client(node: Node) -> Client:
    return Client([URL], "token", transport=httpx.MockTransport(node), retry_s=0)


def test_calls_send_the_documented_requests():
    node = Node()
    c = client(node)
    made = c.create_schedule(
        "nightly", "reports", b"\x00\x01", "0 2 * * *", "Europe/Berlin", tags=["a"], end_at=9
    )
    assert made.body == b"\x00\x01" and made.next_fires == [10, 20] and made.tags == ("a",)
    c.schedule("nightly")
    c.pause_schedule("nightly")
    c.resume_schedule("nightly")
    c.delete_schedule("nightly")
    node.body = {"schedules": [ANSWER]}
    assert [s.name for s in c.schedules()] == ["nightly"]
    assert node.sent == [
        (
            "POST",
            "/v1/schedules",
            {
                "name": "nightly",
                "topic": "reports",
                "cron": "0 2 * * *",
                "timezone": "Europe/Berlin",
                "body_b64": "AAE=",
                "tags": ["a"],
                "end_at": 9,
            },
        ),
        ("GET", "/v1/schedules/nightly", None),
        ("POST", "/v1/schedules/nightly/pause", None),
        ("POST", "/v1/schedules/nightly/resume", None),
        ("DELETE", "/v1/schedules/nightly", None),
        ("GET", "/v1/schedules", None),
    ]


def test_errors_by_code():
    taken = {"error": {"code": "schedule_exists", "message": "taken", "field": "name"}}
    with pytest.raises(ConflictError) as e:
        client(Node(409, taken)).create_schedule("nightly", "reports", "x", "* * * * *")
    assert not isinstance(e.value, AlreadyDeliveredError) and e.value.field == "name"
    delivered = {"error": {"code": "already_delivered", "message": "too late"}}
    with pytest.raises(AlreadyDeliveredError):  # still a ConflictError too
        client(Node(409, delivered)).cancel("0" * 16)
    with pytest.raises(NotFoundError):
        client(Node(404, {"error": {"code": "not_found", "message": "no"}})).schedule("nope")


def test_the_async_client_makes_the_same_calls():
    node = Node()

    async def run() -> None:
        async with AsyncClient([URL], "token", transport=httpx.MockTransport(node), retry_s=0) as c:
            assert (await c.create_schedule("nightly", "reports", "x", "0 2 * * *")).name == "nightly"
            await c.pause_schedule("nightly")
            await c.delete_schedule("nightly")

    asyncio.run(run())
    assert [(m, p) for m, p, _ in node.sent] == [
        ("POST", "/v1/schedules"),
        ("POST", "/v1/schedules/nightly/pause"),
        ("DELETE", "/v1/schedules/nightly"),
    ]
    assert node.sent[0][2]["timezone"] == "UTC" and node.sent[0][2]["body"] == "x"
