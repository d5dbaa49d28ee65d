"""schemathesis against a live 3-node cluster, from the document the master serves.

Every operation of /openapi.json gets schemathesis' coverage phase (boundaries, missing
and wrong-typed values, methods the path does not take) and its fuzzing phase (data
valid and invalid by the document), with the bearer token its security names (the
client token for /v1, the admin token for /admin: ``CONFIG``). The cases go to the nodes
in turn; a follower's 307 is checked against the document and followed to the master. A
release of the master (POST /admin/release-master) moves it; the next case waits until
every node is ready again. Each answer must pass schemathesis' default checks (no 5xx;
status, content type, headers and body as the document says; valid data accepted,
invalid data refused; auth enforced) and ours (``OURS``). Afterwards the cluster must be
ready and every node's store must pass ``check_store``.

One 5xx is a state of the moment, not an answer: ``503 no_master`` with no leader named,
which a master gives while no majority has heard it within the election timeout (its read
lease). The tick thread that sends its heartbeats also syncs the Raft log, and on a loaded
disk (the default suite's other workers) one fsync can take longer than that, and an
election may follow (a write whose entry the lost lead dropped says the same). Such a case
is sent again, as the SDK does (``REFUSED_503``: nothing was done), every
``RESEND_PAUSE_S`` for up to ``RESEND_FOR_S``; a 503 still then is a failure.

Every failure is kept, one report per operation and kind, and the test fails with all of
them at the end (or as soon as the cluster stops being ready).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import AuthContext, Case, CheckContext, GenerationMode, Response
from schemathesis.core.failures import FailureGroup
from schemathesis.generation.meta import TestPhase
from schemathesis.specs.openapi.checks import response_headers_conformance, status_code_conformance
from schemathesis.transport.requests import SameHostRedirectsSession

from horologe.node.config import NodeConfig
from horologe.node.http.app import create_app
from horologe.node.http.rules.messages import MAX_WAIT_MS
from horologe.storage import check_store
from testkit.openapi_document import served_document
from testkit.process_cluster import ADMIN, CLIENT, Cluster

MIN_CASES = 1000
MAX_HOPS = 3
MODES = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
# Per operation and mode, beside the coverage phase's cases; each run draws new ones.
# `make fuzz` sends many more (HOROLOGE_FUZZ_EXAMPLES).
DEFAULT_EXAMPLES = int(os.environ.get("HOROLOGE_FUZZ_EXAMPLES", "25"))
EXAMPLES = {"POST /admin/release-master": 4}  # each release moves the master: a second or so
NO_SHRINK = [Phase.explicit, Phase.generate]  # a failure is recorded, not raised: nothing to shrink
RESEND_PAUSE_S = 0.1  # a case answered 503 no_master is sent again this often (the module's doc)
RESEND_FOR_S = 5.0  # for this long: an election takes 0.3-0.6 s, a lease a round trip
WAIT_MS_SENT = 100  # a valid wait_ms above this is sent as this: an empty topic waits all of it

CONFIG = f"""
[auth.openapi.clientToken]
bearer = "{CLIENT}"
[auth.openapi.adminToken]
bearer = "{ADMIN}"

[checks.negative_data_rejection]
# 413 is how the API refuses what is too large (a body, a batch)
expected-statuses = ["400", "401", "403", "404", "405", "409", "413", "422"]

[[operations]]
include-name-regex = "^(POST /v1/messages(/batch)?|PATCH /v1/messages(/.id.)?)$"
# valid by the document, yet too far from the master's clock (CLOCK_FIELDS)
checks.positive_data_acceptance.expected-statuses = ["2xx", "404", "409", "422"]

[[operations]]
include-name-regex = "^POST /v1/topics/.topic./(ack|nack|release|extend)$"
# well-formed receipts that no pull handed out: 400 invalid_receipt (ACCEPTED_REFUSALS)
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "404", "409"]

[[operations]]
include-name-regex = "^GET /v1/(forecast|topics/.topic./pending)$"
# `to` not after `from`, too many buckets, a cursor not given out, an ISO time Python refuses,
# a pending list's `key` with `cursor`, `from` or `to` (conflicting_fields)
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "422"]

[[operations]]
include-name = "POST /v1/schedules"
# a cron or zone the schema cannot check, end_at not after start_at, a name taken, a cron never firing
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "409", "422"]

[[operations]]
include-name-regex = "^(GET|DELETE) /v1/schedules/.name.$|^POST /v1/schedules/.name./(pause|resume)$"
# a name no schedule has
checks.positive_data_acceptance.expected-statuses = ["2xx", "404"]

[[operations]]
include-name-regex = "^PUT /v1/topics/.topic./subscriptions/.group.$"
# push_allow is empty here: every target is refused (422), and a URL the pattern lets through
# may still be no URL (400 on push.url)
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "422"]

[[operations]]
include-name-regex = "^(GET|DELETE) /v1/topics/.topic./subscriptions/.group.$"
# no subscription can be made with an empty push_allow
checks.positive_data_acceptance.expected-statuses = ["2xx", "404"]

[[operations]]
include-name = "POST /admin/cluster/members"
# a node that is not running (409 not_reachable): the fuzzer starts none
checks.positive_data_acceptance.expected-statuses = ["2xx", "409"]

[[operations]]
include-name = "DELETE /admin/cluster/members/{{node_id}}"
# an id no member has (422 unknown_node; the members' own are never sent: adjust)
checks.positive_data_acceptance.expected-statuses = ["2xx", "422"]

[[operations]]
include-name = "POST /admin/release-master"
# `to` naming no peer (422 unknown_node); each release moves the master, so few of them
checks.positive_data_acceptance.expected-statuses = ["2xx", "409", "422"]
"""

# The only refusals of data the document calls valid, by status: what JSON Schema cannot say.
CLOCK_FIELDS = {"deliver_at", "deliver_after"}  # their bounds run from the master's clock
DURATION_FIELDS = {"max_lateness"}  # "094681d": a duration's bound, which a pattern cannot say
TIME_QUERY = {"from", "to"}  # date-times before 1970, and ISO-8601 forms Python refuses
ACCEPTED_REFUSALS = {
    ("POST /v1/messages", 422): lambda err: err.get("field") in CLOCK_FIELDS | DURATION_FIELDS,
    ("POST /v1/messages/batch", 422): lambda err: err.get("field") in CLOCK_FIELDS,
    ("PATCH /v1/messages/{id}", 422): lambda err: err.get("field") in CLOCK_FIELDS,
    ("PATCH /v1/messages", 422): lambda err: err.get("field") in CLOCK_FIELDS,
    ("POST /v1/topics/{topic}/ack", 400): lambda err: err["code"] == "invalid_receipt",
    ("POST /v1/topics/{topic}/nack", 400): lambda err: err["code"] == "invalid_receipt",
    ("POST /v1/topics/{topic}/release", 400): lambda err: err["code"] == "invalid_receipt",
    ("POST /v1/topics/{topic}/extend", 400): lambda err: err["code"] == "invalid_receipt",
    ("POST /admin/release-master", 422): lambda err: err["code"] == "unknown_node",
    ("GET /v1/forecast", 400): lambda err: err["code"] == "invalid_range" or err.get("field") in TIME_QUERY,
    ("GET /v1/forecast", 422): lambda err: err["code"] == "out_of_range" and err.get("field") in TIME_QUERY,
    ("GET /v1/topics/{topic}/pending", 400): lambda err: (
        err["code"] in ("invalid_range", "conflicting_fields") or err.get("field") in {"cursor", *TIME_QUERY}
    ),
    ("GET /v1/topics/{topic}/pending", 422): lambda err: (
        err["code"] == "out_of_range" and err.get("field") in TIME_QUERY
    ),
    ("POST /v1/schedules", 400): lambda err: (
        err["code"] == "invalid_range" or err.get("field") in {"cron", "timezone", "start_at", "end_at"}
    ),
    ("POST /v1/schedules", 422): lambda err: (
        err["code"] == "out_of_range" and err.get("field") in {"cron", "start_at", "end_at"}
    ),
    ("POST /v1/schedules", 409): lambda err: err["code"] == "schedule_exists",
    ("PUT /v1/topics/{topic}/subscriptions/{group}", 422): lambda err: (
        err["code"] == "push_target_not_allowed"
    ),
    ("PUT /v1/topics/{topic}/subscriptions/{group}", 400): lambda err: err.get("field") == "push.url",
    ("POST /admin/release-master", 409): lambda err: (
        err["code"] in ("no_linked_target", "release_in_progress")
    ),
    ("POST /admin/cluster/members", 409): lambda err: err["code"] in ("not_reachable", "member_exists"),
    ("DELETE /admin/cluster/members/{node_id}", 422): lambda err: err["code"] == "unknown_node",
}
MEMBERS = {"n1", "n2", "n3"}  # the fuzzed cluster's: removing one is no fuzz case
FRAMING_HEADERS = {"content-length", "transfer-encoding"}  # how a request's body is delimited


def load_schema(cluster: Cluster, master: int):
    """The document the live master serves (from_url would leave GET /openapi.json itself out)."""
    served = cluster.http.get(f"{cluster.url(master)}/openapi.json").result()
    return schemathesis.openapi.from_dict(served, config=schemathesis.Config.from_str(CONFIG))


def has_error_shape(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """Every 4xx and 5xx is ``{"error": {"code", "message", "field"?}}`` (``leader`` too on a 503)."""
    if response.status_code < 400 or (case.operation.label == "GET /readyz" and response.status_code == 503):
        return None  # /readyz answers 503 with its readiness fields (the document says so)
    assert response.headers.get("content-type", [""])[0].startswith("application/json"), response.headers
    body = json.loads(response.content)
    allowed = {"error", "leader"} if response.status_code == 503 else {"error"}
    assert isinstance(body, dict) and "error" in body and set(body) <= allowed, body
    err = body["error"]
    assert isinstance(err, dict) and set(err) <= {"code", "message", "field"}, err
    assert isinstance(err.get("code"), str) and isinstance(err.get("message"), str), err
    assert isinstance(err.get("field", ""), str), err
    return True


def refuses_valid_data_only_as_documented(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """Valid data (by the document) refused only for a reason ``ACCEPTED_REFUSALS`` names."""
    if case.meta is None or not case.meta.generation.mode.is_positive or response.status_code < 400:
        return None
    allowed = ACCEPTED_REFUSALS.get((case.operation.label, response.status_code))
    if allowed is None:
        return None  # left to positive_data_acceptance (401/403/404/409 are a state, not the data)
    err = json.loads(response.content)["error"]
    assert allowed(err), f"valid data refused: {response.status_code} {err}"
    return True


def lease_lapsed(response) -> bool:
    """A 503 that says no master is serving this moment, and names none (the module's doc)."""
    if response.status_code != 503:
        return False
    try:
        body = json.loads(response.content)
    except ValueError:
        return False  # no JSON body (a HEAD case): has_error_shape reports it
    return (
        isinstance(body, dict)
        and body.get("error", {}).get("code") == "no_master"
        and body.get("leader") is None
    )


def no_server_error(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """No 5xx at all: the documented 503 and 507 cannot happen to a healthy, idle cluster
    (a case answered 503 no_master is sent again for a while first: ``Fuzz.run``)."""
    assert response.status_code < 500, f"{response.status_code}: {response.content[:500]!r}"
    return True


OURS = [has_error_shape, refuses_valid_data_only_as_documented, no_server_error]


def adjust(case: Case) -> None:
    """What the document cannot tie together, made so before the call (valid data stays valid)."""
    for name in [h for h in case.headers or {} if h.lower() in FRAMING_HEADERS]:
        # The HTTP client's headers, not the API's: a generated one (a Content-Length of
        # "@O'B") makes the request no HTTP message, refused by aiohttp's parser with a
        # plain-text 400 before any route sees it (docs/api.md says so).
        del case.headers[name]
    body = case.body if isinstance(case.body, dict) else None
    positive = case.meta is not None and case.meta.generation.mode.is_positive
    if case.operation.label == "POST /v1/topics/{topic}/pull" and body is not None:
        wait = body.get("wait_ms")
        # 30000.0 is taken as 30000 (rules/model.py's _ints): capped too, or one case waits 30 s
        if type(wait) in (int, float) and WAIT_MS_SENT < wait <= MAX_WAIT_MS:
            body["wait_ms"] = WAIT_MS_SENT
    if case.operation.label == "POST /v1/schedules" and positive and body is not None:
        if case.meta.phase.name == TestPhase.FUZZING and isinstance(body.get("cron"), str):
            # A string the schema takes is rarely a cron or a zone: every other generated case
            # gets real ones (picked by the characters of its name), so schedules get created.
            pick = sum(map(ord, str(body.get("name")))) % 6
            if pick % 2 == 0:
                body["cron"] = "*/5 * * * *"
                body["timezone"] = ("UTC", "Europe/Berlin", "America/New_York")[pick // 2]
    if case.operation.label == "POST /admin/cluster/members" and positive and body is not None:
        # No node to add is running: its address is a closed local port, refused at once
        # (a generated host name would wait for a DNS answer that never comes, ~2 s a case).
        if isinstance(body.get("http"), str):
            body["http"] = "127.0.0.1:1"
    if case.operation.label == "DELETE /admin/cluster/members/{node_id}":
        if unquote(str((case.path_parameters or {}).get("node_id"))) in MEMBERS:
            case.path_parameters["node_id"] = "not-a-member"
    for name, value in (case.path_parameters or {}).items():
        if not isinstance(value, str):
            # schemathesis percent-encodes only a string (quote_all); a wrong-typed value is put
            # in the path with str() as it is, and a "?", "#" or "/" in it would end the path there
            case.path_parameters[name] = quote(str(value), safe="")
    raw = (case.path_parameters or {}).get("topic")  # kept percent-encoded
    if positive and body is not None and isinstance(raw, str) and unquote(raw).startswith("%DLQ"):
        # A group pulls its own DLQ only, so the topic is made from the body's group. (Made
        # anew: schemathesis does not escape a "%" that two hex digits follow, "%DLQ%B7x".)
        case.path_parameters["topic"] = quote(f"%DLQ%{body.get('group')}", safe="")
    elif positive and isinstance(raw, str) and unquote(raw).startswith("%RETRY"):
        # The same escaping: a retry topic (pending) is made anew from a name of its own.
        case.path_parameters["topic"] = quote("%RETRY%fuzz", safe="")


@dataclass
class Fuzz:
    """Sends cases to the nodes in turn, follows redirects, checks answers, keeps the tally."""

    cluster: Cluster
    cases: Counter = field(default_factory=Counter)  # by operation
    statuses: Counter = field(default_factory=Counter)  # by (operation, status)
    failures: dict[tuple, list] = field(default_factory=dict)  # (operation, titles) -> [count, first report]
    redirects: int = 0
    releases: int = 0
    resent: int = 0  # cases answered 503 no_master, and so sent again
    # One session for every call: its connections are kept, and it reads no proxy settings
    # from the environment (a new session per call did both, a sixth of the test's time).
    session: SameHostRedirectsSession = field(default_factory=SameHostRedirectsSession)

    def __post_init__(self) -> None:
        self.session.trust_env = False

    def run(self, case: Case) -> None:
        adjust(case)
        label = case.operation.label
        try:
            response, base = self.send(case)
            if lease_lapsed(response):
                self.resent += 1
                deadline = time.monotonic() + RESEND_FOR_S
                while lease_lapsed(response) and time.monotonic() < deadline:
                    time.sleep(RESEND_PAUSE_S)
                    response, base = self.send(case)
            self.cases[label] += 1
            self.statuses[(label, response.status_code)] += 1
            case.validate_response(response, additional_checks=OURS, transport_kwargs={"base_url": base})
        except (AssertionError, FailureGroup) as e:
            titles = (
                tuple(sorted(f.title for f in e.exceptions))
                if isinstance(e, FailureGroup)
                else (str(e)[:80],)
            )
            self.failures.setdefault((label, titles), [0, f"{label}: {e}"])[0] += 1
            self.healthy()
            return
        if label == "POST /admin/release-master" and response.status_code == 200:
            self.releases += 1
            self.healthy()  # the next case needs a master that knows its clocks

    def healthy(self) -> None:
        """Every node ready and linked again, or the run ends here with what it found."""
        try:
            self.cluster.wait_connected()
        except TimeoutError:
            raise AssertionError("the cluster is no longer ready after:\n\n" + self.report()) from None

    def report(self) -> str:
        """One report per operation and kind of failure, with how often it happened."""
        return "\n\n".join(f"({n} times) {first}" for n, first in self.failures.values())

    def send(self, case: Case) -> tuple[Response, str]:
        """Call a node (each in turn); follow a follower's 307, checked by the document, to the master."""
        base = self.cluster.url(sum(self.cases.values()) % len(self.cluster.indexes))
        for _hop in range(MAX_HOPS + 1):
            response = case.call(base_url=base, session=self.session, timeout=30)
            if response.status_code != 307:
                return response, base
            self.redirects += 1
            case.validate_response(response, checks=[status_code_conformance, response_headers_conformance])
            location = urlsplit(response.headers["location"][0])
            base = f"{location.scheme}://{location.netloc}"
            assert base in {self.cluster.url(i) for i in self.cluster.indexes}, f"redirected to {base}"
        raise AssertionError(f"more than {MAX_HOPS} redirects in a row")


def coverage_cases(schema, op) -> list[Case]:
    """schemathesis' coverage phase: boundary and missing values, wrong types, other methods."""
    cases = list(
        schema.iter_coverage_cases(
            op,
            generation_modes=MODES,
            generation_config=schema.config.generation_for(operation=op, phase="coverage"),
        )
    )
    for case in cases:
        schema.apply_auth(case, AuthContext(operation=op, app=None))
    return cases


def fuzz_operation(fuzz: Fuzz, op, mode: GenerationMode, examples: int) -> None:
    """schemathesis' fuzzing phase: Hypothesis draws ``examples`` cases of one mode."""

    @given(case=op.as_strategy(mode))
    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        phases=NO_SHRINK,
    )
    def run(case: Case) -> None:
        fuzz.run(case)

    run()


async def test_a_path_parameter_of_any_type_stays_in_its_segment(tmp_path):
    """A negative case may give a path parameter a list; its text must not end the path."""
    app = create_app(NodeConfig(node_id="n1", data_dir=str(tmp_path), http="127.0.0.1:1", raft="127.0.0.1:2"))
    op = schemathesis.openapi.from_dict(await served_document(app))["/v1/topics/{topic}/pending"]["GET"]
    for topic in ([["a?b"]], {"c": "d#e"}, ["f/g"], 7):
        case = op.Case(path_parameters={"topic": topic}, query={"limit": 1})
        adjust(case)
        path = case.formatted_path
        assert urlsplit(path).path == path and path.count("/") == 4 and path.endswith("/pending"), path
        assert unquote(path.split("/")[3]) == str(topic)


def test_every_route_answers_as_its_document_says(make_cluster):
    cluster = make_cluster()
    schema = load_schema(cluster, cluster.wait_connected())
    fuzz = Fuzz(cluster)
    operations = [result.ok() for result in schema.get_all_operations()]
    for op in operations:
        for case in coverage_cases(schema, op):
            fuzz.run(case)
        for mode in MODES:
            if mode == GenerationMode.NEGATIVE and not (op.body or list(op.iter_parameters())):
                continue  # nothing to make invalid: the coverage phase sent what there is (other methods)
            fuzz_operation(fuzz, op, mode, EXAMPLES.get(op.label, DEFAULT_EXAMPLES))
    total = sum(fuzz.cases.values())
    print(
        f"\n{total} cases, {fuzz.redirects} redirects followed, {fuzz.releases} releases,"
        f" {fuzz.resent} sent again after 503 no_master"
    )
    for (label, status), n in sorted(fuzz.statuses.items()):
        print(f"  {label} {status}: {n}")
    assert not fuzz.failures, f"{len(fuzz.failures)} kinds of failure:\n\n" + fuzz.report()
    assert total >= MIN_CASES, f"only {total} cases ran"
    assert {op.label for op in operations} == set(fuzz.cases)
    cluster.wait_connected()
    cluster.stop_all()
    for i in cluster.indexes:
        with cluster.store(i) as s:
            check_store(s)
