"""GET /openapi.json: a valid OpenAPI 3.1 document, and the routes it lists are exactly
those create_app registers and docs/api.md describes."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from openapi_spec_validator import validate

from horologe.client.calls import REFUSED_503
from horologe.cluster import EntryDroppedError, NotMasterError, ProposalRejectedError
from horologe.node.config import NodeConfig
from horologe.node.http.app import create_app
from horologe.node.http.common import SERVICE
from horologe.node.http.errors import ApiError
from horologe.node.http.middleware import errors_and_auth
from horologe.node.http.rules.schedules import parse_schedule
from horologe.node.master_hold import MasterHold
from horologe.storage import InvalidFieldError
from horologe.storage.message import MessageLimits
from horologe.storage.message_json import parse_message
from testkit.openapi_document import served_document

API_MD = Path(__file__).resolve().parents[2] / "docs" / "api.md"
METHODS = "GET|POST|PUT|PATCH|DELETE"
ROUTE = re.compile(rf"`({METHODS}) (/[^`?\s]*)(?:\?[^`]*)?`")  # a query string names no other route
BULLET = re.compile(rf"^- `({METHODS}) (/[^`?\s]*)(?:\?[^`]*)?`")

Route = tuple[str, str]


def app_routes(app) -> set[Route]:
    """(METHOD, path) of every route the app registers; aiohttp's HEAD twins of GET left out."""
    return {
        (r.method, r.resource.canonical)
        for r in app.router.routes()
        if r.method != "HEAD" and r.resource is not None
    }


def spec_routes(document: dict) -> set[Route]:
    return {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}


def docs_routes(text: str) -> set[Route]:
    """The routes docs/api.md describes: in ``### `METHOD /path` …`` headings, and as the first
    words of ``- `METHOD /path` …`` bullets (the Admin API and Unauthenticated lists)."""
    found: set[Route] = set()
    for line in text.splitlines():
        if line.startswith("### "):
            found |= set(ROUTE.findall(line))
        elif m := BULLET.match(line):
            found.add((m[1], m[2]))
    return found


def mismatches(app: set[Route], spec: set[Route], docs: set[Route]) -> list[str]:
    """What one of the three lists lacks that another has, one line each."""
    sources = {"create_app": app, "/openapi.json": spec, "docs/api.md": docs}
    every = app | spec | docs
    return [
        f"{method} {path} is missing from {name}"
        for method, path in sorted(every)
        for name, routes in sources.items()
        if (method, path) not in routes
    ]


@pytest.fixture
def app(tmp_path):
    return create_app(
        NodeConfig(node_id="n1", data_dir=str(tmp_path), http="127.0.0.1:1", raft="127.0.0.1:2")
    )


@pytest.fixture
async def served(app) -> dict:
    """The body the registered GET /openapi.json route answers (the app is not started)."""
    return await served_document(app)


def test_the_served_document_is_valid_openapi_3_1(served):
    assert served["openapi"].startswith("3.1")
    validate(served)  # openapi-spec-validator: raises on any violation


def test_create_app_the_document_and_the_docs_list_the_same_routes(app, served):
    docs = docs_routes(API_MD.read_text())
    assert len(docs) >= 14, sorted(docs)  # the parser still reads the docs
    assert mismatches(app_routes(app), spec_routes(served), docs) == []


@pytest.mark.parametrize("source", ["create_app", "/openapi.json", "docs/api.md"])
def test_a_route_missing_from_any_one_list_is_named(app, served, source):
    routes = {
        "create_app": app_routes(app),
        "/openapi.json": spec_routes(served),
        "docs/api.md": docs_routes(API_MD.read_text()),
    }
    dropped = ("POST", "/v1/topics/{topic}/nack")
    routes[source].discard(dropped)
    assert mismatches(*routes.values()) == [f"POST /v1/topics/{{topic}}/nack is missing from {source}"]


PUBLIC = {"/healthz", "/readyz", "/metrics", "/openapi.json", "/ui", "/ui/{file}"}


def test_each_route_s_operation_names_the_token_of_its_prefix(served):
    """/v1 the client token, /admin the admin token, health, metrics, this document and the
    dashboard's files none; and every route answers the JSON error shape for what its scope
    implies."""
    for path, ops in served["paths"].items():
        for method, op in ops.items():
            if path in PUBLIC:
                want = []
            elif path.startswith("/admin/"):
                want = [{"adminToken": []}]
            else:
                assert path.startswith("/v1/"), path
                want = [{"clientToken": []}]
            assert op["security"] == want, (method, path)
            if want:
                assert {"401", "403"} <= set(op["responses"]), (method, path)
            for status, answer in op["responses"].items():
                if int(status) >= 400 and (path, status) != ("/readyz", "503"):
                    name = answer["$ref"].rsplit("/", 1)[1]
                    schema = served["components"]["responses"][name]["content"]["application/json"]["schema"]
                    assert schema["$ref"] in (
                        "#/components/schemas/Error",
                        "#/components/schemas/Unavailable",
                    )


TOKENS = {"clientToken": "c-token", "adminToken": "a-token"}


@pytest.fixture
def guarded(tmp_path):
    return create_app(
        NodeConfig(
            node_id="n1",
            data_dir=str(tmp_path),
            http="127.0.0.1:1",
            raft="127.0.0.1:2",
            client_token=TOKENS["clientToken"],
            admin_token=TOKENS["adminToken"],
        )
    )


async def status_through_the_middleware(app, method: str, path: str, token: str | None) -> int:
    """The status errors_and_auth answers for this request, routed as aiohttp routes it; a
    route's handler it lets through answers 200."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = make_mocked_request(method, path, headers=headers, app=app)
    match_info = await app.router.resolve(request)  # what aiohttp's Application._handle does
    match_info.add_app(app)
    match_info.freeze()
    request._match_info = match_info

    async def handler(request):
        if request.match_info.http_exception:  # aiohttp's 404 or 405
            raise request.match_info.http_exception
        return web.Response(status=200)

    return (await errors_and_auth(request, handler)).status


async def test_the_middleware_asks_each_route_for_the_token_its_operation_names(guarded, served):
    """The token check is the operation's scope (route_table.scopes), route by route: without
    a token 401, with the other scope's token 403, with its own through; a public route lets
    every caller through. A path no route matches wants either token first; a method its
    path does not take, the token of the path's routes."""
    for path, ops in served["paths"].items():
        concrete = re.sub(r"\{\w+\}", "x", path).replace("/messages/x", "/messages/" + "0" * 16)
        for method, op in ops.items():
            scope = next(iter(op["security"][0]), None) if op["security"] else None
            statuses = [
                await status_through_the_middleware(guarded, method.upper(), concrete, token)
                for token in (None, TOKENS["adminToken"], TOKENS["clientToken"])
            ]
            want = {
                None: [200, 200, 200],
                "clientToken": [401, 403, 200],
                "adminToken": [401, 200, 403],
            }[scope]
            assert statuses == want, (method, path, concrete)
    for token, status in (
        (None, 401),
        ("wrong", 403),
        (TOKENS["adminToken"], 404),
        (TOKENS["clientToken"], 404),
    ):
        assert await status_through_the_middleware(guarded, "GET", "/v1/nothing", token) == status
        assert await status_through_the_middleware(guarded, "GET", "/admin/nothing", token) == status
    # Any path below the dashboard's is its route's (public): a newline in it too.
    assert await status_through_the_middleware(guarded, "GET", "/ui/a%0Ab", None) == 200
    # A method the path does not take: the scope of the path's routes, then 405.
    assert await status_through_the_middleware(guarded, "DELETE", "/healthz", None) == 405
    assert await status_through_the_middleware(guarded, "DELETE", "/v1/messages/batch", None) == 401
    assert (
        await status_through_the_middleware(guarded, "DELETE", "/v1/messages/batch", TOKENS["clientToken"])
        == 405
    )


def test_the_document_s_rules_are_the_validators(served):
    """Spot checks that the patterns and bounds come from the rules the server applies."""
    schemas = served["components"]["schemas"]
    message = schemas["Message"]["properties"]
    assert re.fullmatch(schemas["Name"]["pattern"].strip("^$"), "orders.v2")
    assert not re.fullmatch(schemas["Name"]["pattern"].strip("^$"), "_orders")
    assert message["delay_level"]["maximum"] == 18
    assert message["tags"]["oneOf"][1]["maxItems"] == 16
    assert schemas["Pull"]["properties"]["visibility_ms"]["maximum"] == 12 * 3_600_000


@pytest.mark.parametrize(
    "name",
    ["x-horologe-schedule", "X-Horologe-Origin", "x-horologe-on-late", "x-horologe-", "x-horologe",
     "trace-x-horologe-1", "h"],
)  # fmt: skip
@pytest.mark.parametrize(
    "schema_name, fields, parse",
    [
        ("Message", {}, parse_message),
        ("NewSchedule", {"name": "tick", "cron": "* * * * *", "timezone": "UTC"}, parse_schedule),
    ],
)
def test_a_header_name_the_node_keeps_is_invalid_by_the_document_as_by_the_rule(
    served, schema_name, fields, parse, name
):
    """The fuzz test sends what the document allows and expects it taken: a header named
    like the node's own (``x-horologe-`` in any case) is refused, by a message's rules and by
    a schedule's (whose firings are messages), so the document says so for both."""
    schema = {**served["components"]["schemas"][schema_name], "components": served["components"]}
    obj = {"topic": "orders", "body": "x", "headers": {name: "v"}, **fields}
    by_document = jsonschema.Draft202012Validator(schema).is_valid(obj)
    try:
        parse(obj, 0, MessageLimits())
        by_rule = True
    except (InvalidFieldError, ApiError):
        by_rule = False
    assert by_document == by_rule == (not name.lower().startswith("x-horologe-"))


OPERATION_ID = re.compile(r"^[a-z]+(_[a-z]+)+$")  # snake_case, a verb and a noun at least


def test_every_operation_has_a_unique_operation_id_and_one_declared_tag(served):
    """A generated client names its functions by operationId and its modules by tag."""
    tags = {t["name"]: t.get("description", "") for t in served["tags"]}
    assert len(tags) == len(served["tags"]) and all(tags.values()), served["tags"]
    ids: dict[str, Route] = {}
    used: set[str] = set()
    for path, ops in served["paths"].items():
        for method, op in ops.items():
            where = (method.upper(), path)
            assert OPERATION_ID.fullmatch(op.get("operationId", "")), (where, op.get("operationId"))
            assert op["operationId"] not in ids, (where, ids.get(op["operationId"]))
            ids[op["operationId"]] = where
            assert len(op.get("tags", [])) == 1 and op["tags"][0] in tags, (where, op.get("tags"))
            used |= set(op["tags"])
    assert used == set(tags), "a declared tag no operation uses"
    assert {"produce_message", "pull_messages", "ack_messages"} <= set(ids)
    docs = API_MD.read_text()
    assert [i for i in ids if f"`{i}`" not in docs] == [], "operationIds docs/api.md does not name"


class _Touched(Exception):
    """The handler used the service for something other than the master check."""


class _Follower:
    """A service that is not the master, and that nothing else may be asked of."""

    def __init__(self) -> None:
        self.checked = 0
        self.hold = MasterHold(self.require_master, lambda: False, 0.3)  # part of the check

    def require_master(self) -> None:
        self.checked += 1
        raise NotMasterError("http://127.0.0.1:9")

    def __getattr__(self, name: str):
        raise _Touched(name)


async def test_a_route_checks_for_the_master_first_exactly_when_its_operation_says_so(app, served):
    """An operation with the master rule documents 307/503 (node/http/openapi/operations.py);
    its route makes the check that answers them before anything the request says is read
    (its body, path names that are not names) and before the handler asks the service for
    anything else; a route without the rule never makes it."""
    svc = app[SERVICE] = _Follower()
    ruled = 0
    for route in app.router.routes():
        if route.method == "HEAD" or route.resource is None:
            continue
        where = (route.method, route.resource.canonical)
        names = re.findall(r"\{(\w+)", route.resource.canonical)
        bad_names = dict.fromkeys(names, "not a name!")
        request = make_mocked_request(route.method, "/", app=app, match_info=bad_names)
        before = svc.checked
        try:
            await route.handler(request)
            outcome = "answered"
        except NotMasterError:
            outcome = "the master check"
        except Exception as e:  # noqa: BLE001 - any other outcome: a refusal, the service asked
            outcome = type(e).__name__
        if "307" in served["paths"][where[1]][where[0].lower()]["responses"]:
            assert (outcome, svc.checked - before) == ("the master check", 1), where
            ruled += 1
        else:
            assert svc.checked == before, where
    assert ruled >= 20, ruled  # most routes have the rule


async def test_an_entry_dropped_for_certain_is_a_503_a_client_resends(guarded):
    """A proposal Raft dropped for certain (nothing was done) is ``no_master``, which the SDK
    resends (REFUSED_503); one whose fate is unknown stays ``unavailable``, which it does not."""
    for error, code in (
        (
            EntryDroppedError("the master lost its place before the entry was appended; nothing was done"),
            "no_master",
        ),
        (ProposalRejectedError("the leader changed before the entry was known to commit"), "unavailable"),
    ):

        async def handler(request, error=error):
            raise error

        request = make_mocked_request(
            "POST", "/v1/messages", headers={"Authorization": f"Bearer {TOKENS['clientToken']}"}, app=guarded
        )
        response = await errors_and_auth(request, handler)
        body = orjson.loads(response.body)
        assert (response.status, body["error"]["code"], body["leader"]) == (503, code, None)
        assert (code in REFUSED_503) == isinstance(error, EntryDroppedError)
