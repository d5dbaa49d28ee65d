"""The one HTTP path (horologe.client.calls) on httpx's MockTransport: no node processes.

Each fake node answers by its port; the transport records every request, so a test
can say where a call went, with what method, body and token.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import msgpack
import pytest

from horologe.client import (
    AsyncClient,
    Client,
    InvalidRequestError,
    RawClient,
    UnavailableError,
)
from horologe.client.calls import MSGPACK
from horologe.client.core import PullNames

N1, N2, N3 = "http://127.0.0.1:8081", "http://127.0.0.1:8082", "http://127.0.0.1:8083"
TOKEN = "tok"


class FakeNodes:
    """``answers[port]`` is a function of the request, or an exception class to raise."""

    def __init__(self, **answers) -> None:
        self.answers = {int(port[1:]): a for port, a in answers.items()}
        self.seen: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        answer = self.answers[request.url.port]
        if isinstance(answer, type) and issubclass(answer, Exception):
            raise answer("fake", request=request)
        return answer(request)

    def ports(self) -> list[int]:
        return [r.url.port for r in self.seen]


def redirect_to(port: int):
    return lambda r: httpx.Response(
        307, headers={"Location": f"http://127.0.0.1:{port}{r.url.raw_path.decode()}"}
    )


def created(r: httpx.Request) -> httpx.Response:
    """As a node answers a produce, sent in JSON or (the SDK's own) msgpack."""
    sent = msgpack.unpackb(r.content) if r.headers["Content-Type"] == MSGPACK else json.loads(r.content)
    return httpx.Response(201, json={"id": "m1", "topic": "t", "deliver_at": 5, "echo": sent})


def unavailable(r: httpx.Request) -> httpx.Response:
    return httpx.Response(503, json={"error": {"code": "no_master", "message": "election"}, "leader": None})


def client(nodes: FakeNodes, urls=(N1, N2, N3), **settings) -> Client:
    return Client(list(urls), TOKEN, transport=httpx.MockTransport(nodes), **settings)


def test_a_redirect_is_followed_with_the_same_method_and_body_and_the_master_remembered():
    nodes = FakeNodes(p8081=redirect_to(8083), p8082=redirect_to(8083), p8083=created)
    with client(nodes) as c:
        reply = c.request("POST", "/v1/messages", {"topic": "t", "body": "x"})
        assert reply.status == 201 and reply.body["echo"] == {"topic": "t", "body": "x"}
        assert [(r.method, r.url.port) for r in nodes.seen] == [("POST", 8081), ("POST", 8083)]
        assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in nodes.seen)
        c.produce("t", "again")
        assert nodes.ports() == [8081, 8083, 8083]  # the master first, once known


def test_a_redirect_to_a_host_not_given_is_refused_and_gets_no_token():
    evil = lambda r: httpx.Response(307, headers={"Location": "http://evil.example:8083/v1/messages"})  # noqa: E731
    nodes = FakeNodes(p8081=evil)
    with client(nodes, urls=[N1]) as c, pytest.raises(UnavailableError, match="not among the nodes given"):
        c.request("POST", "/v1/messages", {})
    assert [r.url.host for r in nodes.seen] == ["127.0.0.1"]


def test_503_is_retried_until_an_answer_then_the_budget_runs_out():
    answers = iter([unavailable, unavailable, created])
    nodes = FakeNodes(p8081=lambda r: next(answers)(r))
    with client(nodes, urls=[N1], retry_s=5) as c:
        assert c.request("POST", "/v1/messages", {"topic": "t"}).status == 201
        assert len(nodes.seen) == 3
    nodes = FakeNodes(p8081=unavailable)
    with client(nodes, urls=[N1], retry_s=0.3) as c, pytest.raises(UnavailableError) as e:
        c.request("POST", "/v1/messages", {})
    assert (e.value.status, e.value.code) == (503, "no_master") and 2 <= len(nodes.seen) <= 4


def test_an_error_answer_is_raised_at_once_with_its_code_and_field():
    refuse = lambda r: httpx.Response(  # noqa: E731
        422, json={"error": {"code": "out_of_range", "message": "1..18", "field": "delay_level"}}
    )
    nodes = FakeNodes(p8081=refuse, p8082=created, p8083=created)
    with client(nodes) as c, pytest.raises(InvalidRequestError) as e:
        c.produce("t", "x", delay_level=19)
    assert (e.value.status, e.value.code, e.value.field) == (422, "out_of_range", "delay_level")
    assert nodes.ports() == [8081]


def test_an_unreachable_node_is_passed_over():
    nodes = FakeNodes(p8081=httpx.ConnectError, p8082=created, p8083=created)
    with client(nodes) as c:
        assert c.produce("t", "x").id == "m1"
    assert nodes.ports() == [8081, 8082]


def test_a_timed_out_nack_is_not_resent_but_a_produce_is():
    nodes = FakeNodes(p8081=httpx.ReadTimeout, p8082=created, p8083=created)
    with client(nodes) as c:
        with pytest.raises(UnavailableError, match="may or may not have applied"):
            c.nack("t", "g", ["r"])
        assert nodes.ports() == [8081]
        assert c.produce("t", "x").id == "m1"  # carries a key: a resend is stored once
        assert nodes.ports() == [8081, 8081, 8082]


def test_a_nack_asked_to_be_resent_goes_on_to_the_next_node_after_a_timeout():
    """The cluster applies one nack to a hand-out: a task queue's dead-letter nack is
    sent again rather than lost across a failover."""
    moved = lambda r: httpx.Response(200, json={"retried": 0, "dead_lettered": 1})  # noqa: E731
    nodes = FakeNodes(p8081=httpx.ReadTimeout, p8082=moved, p8083=moved)
    with client(nodes) as c:
        assert c.nack("t", "g", ["r"], dead_letter=True, resend=True) == {"retried": 0, "dead_lettered": 1}
        assert nodes.ports() == [8081, 8082]


def test_a_nack_answered_503_timeout_is_not_resent_but_one_refused_as_no_master_is():
    """A 503 ``timeout`` (or ``transfer_unconfirmed``) may have taken effect: a call that
    must not be repeated raises it at once; ``no_master`` refused it before anything."""
    timed_out = lambda r: httpx.Response(  # noqa: E731
        503, json={"error": {"code": "timeout", "message": "entry neither committed nor rejected"}}
    )
    nodes = FakeNodes(p8081=timed_out, p8082=created, p8083=created)
    with client(nodes) as c:
        with pytest.raises(UnavailableError) as e:
            c.nack("t", "g", ["r"])
        assert (e.value.status, e.value.code) == (503, "timeout")
        assert nodes.ports() == [8081]
    answers = iter([unavailable, lambda r: httpx.Response(200, json={"retried": 1, "dead_lettered": 0})])
    nodes = FakeNodes(p8081=lambda r: next(answers)(r))
    with client(nodes, urls=[N1], retry_s=5) as c:
        assert c.nack("t", "g", ["r"]) == {"retried": 1, "dead_lettered": 0}
        assert nodes.ports() == [8081, 8081]


def test_nodes_redirecting_to_each_other_end_in_unavailable_not_a_spin():
    nodes = FakeNodes(p8081=redirect_to(8082), p8082=redirect_to(8081))
    with client(nodes, urls=[N1, N2], retry_s=0.3) as c, pytest.raises(UnavailableError, match="redirects"):
        c.request("GET", "/v1/messages/m1")
    assert len(nodes.seen) < 30  # a few per pass, a pass each 0.2 s


def test_one_string_may_name_several_nodes_comma_separated():
    """As HOROLOGE_URL does; it was taken as one URL, whose port then failed to parse."""
    nodes = FakeNodes(p8081=httpx.ConnectError, p8082=lambda r: httpx.Response(200, json={}))
    with Client(f"{N1}, {N2}/,", TOKEN, transport=httpx.MockTransport(nodes), retry_s=1) as c:
        assert c.request("GET", "/v1/messages/m1").status == 200
    assert nodes.ports() == [8081, 8082]


def test_bad_settings_are_refused_before_anything_is_sent():
    with pytest.raises(ValueError, match="not a node URL"):
        Client(["127.0.0.1:8081"], TOKEN)
    with pytest.raises(ValueError, match="not a node URL"):
        Client(["ftp://127.0.0.1:8081"], TOKEN)
    with pytest.raises(ValueError, match="printable ASCII"):
        Client([N1], "tok\nX-Injected: 1")
    with pytest.raises(ValueError, match="timeout"):
        Client([N1], TOKEN, timeout=0)
    with pytest.raises(ValueError, match="retry_s"):
        Client([N1], TOKEN, retry_s=-1)


def test_the_async_client_runs_the_same_plan():
    answers = iter([unavailable, created])
    nodes = FakeNodes(p8081=redirect_to(8082), p8082=lambda r: next(answers)(r), p8083=created)

    async def run():
        async with AsyncClient([N1, N2, N3], TOKEN, transport=httpx.MockTransport(nodes)) as c:
            return await c.produce("t", "x")

    assert asyncio.run(run()).id == "m1"
    # 8081 sends it to 8082, which is busy; the next node, 8081, names it again: now it answers
    assert nodes.ports() == [8081, 8082, 8081, 8082]


def test_the_async_client_wants_async_with():
    c = AsyncClient([N1], TOKEN)
    with pytest.raises(RuntimeError, match="async with"):
        asyncio.run(c.status("m1"))


def test_raw_mode_follows_nothing_retries_nothing_and_raises_for_no_status():
    plain = lambda r: httpx.Response(200, text="horologe_pending 0\n")  # noqa: E731
    nodes = FakeNodes(p8081=redirect_to(8083), p8082=unavailable, p8083=plain)
    with RawClient(transport=httpx.MockTransport(nodes)) as raw:
        moved = raw.post(f"{N1}/v1/messages", {"topic": "t"}, token=TOKEN)
        assert moved.status == 307 and moved.headers["location"] == f"{N3}/v1/messages"
        busy = raw.get(f"{N2}/readyz")
        assert (busy.status, busy.body["error"]["code"]) == (503, "no_master")
        with pytest.raises(UnavailableError) as e:
            busy.result()
        assert e.value.status == 503
        metrics = raw.get(f"{N3}/metrics")
        assert metrics.text == "horologe_pending 0\n" and "error" in metrics.body  # not JSON
        raw.post(f"{N3}/x", content=b"{not json", headers={"Content-Type": "application/json"})
    assert nodes.ports() == [8081, 8082, 8083, 8083]
    assert nodes.seen[0].headers["Authorization"] == f"Bearer {TOKEN}"
    assert "Authorization" not in nodes.seen[1].headers
    assert nodes.seen[3].content == b"{not json"


def test_raw_mode_raises_unavailable_for_a_node_that_cannot_be_reached():
    nodes = FakeNodes(p8081=httpx.ConnectError)
    with RawClient(transport=httpx.MockTransport(nodes)) as raw, pytest.raises(UnavailableError) as e:
        raw.get(f"{N1}/readyz")
    assert e.value.status == 0


class NodeBeforeNamedPulls:
    """A node that predates named pulls: it refuses ``pull_id`` as an unknown field, as
    such a node's request rules do, and otherwise answers an empty pull."""

    def __init__(self) -> None:
        self.names: list[str | None] = []

    def __call__(self, r: httpx.Request) -> httpx.Response:
        body = json.loads(r.content)
        self.names.append(body.get("pull_id"))
        if "pull_id" in body:
            error = {"code": "unknown_field", "message": "unknown field 'pull_id'", "field": "pull_id"}
            return httpx.Response(400, json={"error": error})
        return httpx.Response(200, json={"messages": [], "batch_receipts": []})


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_pull_refused_its_name_by_an_older_node_goes_again_unnamed_and_names_come_back_later(kind):
    node = NodeBeforeNamedPulls()
    transport = httpx.MockTransport(node)
    now = [1000.0]
    client = (Client if kind == "sync" else AsyncClient)([N1], TOKEN, transport=transport)
    client.pull_names = PullNames(clock=lambda: now[0])

    def pull():
        if kind == "sync":
            return client.pull("t", "g")

        async def once():
            async with client:
                return await client.pull("t", "g")

        return asyncio.run(once())

    assert pull() == []
    assert node.names[0] is not None and node.names[1:] == [None]  # refused, sent again unnamed
    assert pull() == [] and node.names[2:] == [None]  # one request: unnamed while the node is old
    now[0] += PullNames.UNNAMED_S + 1
    assert pull() == [] and node.names[3] is not None and node.names[4:] == [None]  # tried again


def test_any_other_refusal_of_a_pull_is_raised_as_it_is():
    def refuse(r: httpx.Request) -> httpx.Response:
        error = {"code": "unknown_field", "message": "unknown field 'colour'", "field": "colour"}
        return httpx.Response(400, json={"error": error})

    fake = FakeNodes(p8081=refuse)
    with Client([N1], TOKEN, transport=httpx.MockTransport(fake)) as client:
        with pytest.raises(InvalidRequestError, match="colour"):
            client.pull("t", "g")
    assert len(fake.seen) == 1
