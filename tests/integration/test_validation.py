"""Bad input is refused with the JSON error shape, the right status, and nothing reaches Raft."""

from __future__ import annotations

import json
import socket
import time

import msgpack
import pytest
from click.testing import CliRunner

from horologe.cli import main
from horologe.client import Client, HorologeError
from testkit.process_cluster import ADMIN, CLIENT

CASES = [
    ({"topic": "t", "body": "x", "colour": "red"}, 400, "unknown_field", "colour"),
    ({"topic": "t", "body": "x", "deliver_at": 1, "deliver_after": 5}, 400, "invalid_field", "deliver_after"),
    ({"topic": "t", "body": "x", "delay_level": 0}, 422, "out_of_range", "delay_level"),
    ({"topic": "t", "body": "x", "delay_level": 19}, 422, "out_of_range", "delay_level"),
    ({"topic": "bad topic!", "body": "x"}, 400, "invalid_field", "topic"),
    ({"topic": "%DLQ%g", "body": "x"}, 400, "invalid_field", "topic"),
    ({"topic": "t", "body": "x" * (256 * 1024 + 1)}, 413, "too_large", "body"),
    ({"topic": "t"}, 400, "invalid_field", "body"),
    ({"topic": "t", "body": "x", "body_b64": "eA=="}, 400, "invalid_field", "body"),
    ({"topic": "t", "body_b64": "not base64!"}, 400, "invalid_field", "body_b64"),
    ({"topic": "t", "body": "x", "deliver_after": "5 weeks"}, 400, "invalid_field", "deliver_after"),
    ({"topic": "t", "body": "x", "deliver_after": -5}, 422, "out_of_range", "deliver_after"),
    ({"topic": "t", "body": "x", "deliver_at": "2026-01-01T00:00:00"}, 400, "invalid_field", "deliver_at"),
    ({"topic": "t", "body": "x", "deliver_after": "500d"}, 422, "out_of_range", "deliver_after"),
    ({"topic": "t", "body": "x", "tags": ["ok", "no spaces"]}, 400, "invalid_field", "tags"),
    ({"topic": "t", "body": "x", "headers": {"a": 1}}, 400, "invalid_field", "headers"),
    ({"topic": "t", "body": "x", "key": ""}, 400, "invalid_field", "key"),
    (["not", "an", "object"], 400, "invalid_body", None),
]


def _stored(cluster, master: int) -> int:
    """Counted on the master: it has applied every write it acknowledged (a follower may lag)."""
    return cluster.status(master)["counters"]["stored"]


def test_bad_input_is_refused_and_never_proposed(cluster):
    master = cluster.wait_leader()
    url = f"{cluster.url(master)}/v1/messages"
    before = _stored(cluster, master)
    for body, status, code, field in CASES:
        r = cluster.to_master("POST", "/v1/messages", body, token=CLIENT)
        err = r.body["error"]
        assert (r.status, err["code"], err.get("field")) == (status, code, field), body
    r = cluster.client(master).request(
        "POST", "/v1/messages/batch", {"messages": [CASES[0][0], {"topic": "t", "body": "ok"}]}
    )
    assert r.status == 200 and "error" in r.body["results"][0] and "id" in r.body["results"][1]
    json_type = {"Content-Type": "application/json"}
    r = cluster.to_master("POST", "/v1/messages", content=b"{not json", token=CLIENT, headers=json_type)
    assert (r.status, r.body["error"]["code"]) == (400, "invalid_json")
    for not_json in (b'{"topic": "t", "body": "\\udc80"}', b'{"topic": "t", "body": "x", "deliver_at": NaN}'):
        r = cluster.to_master("POST", "/v1/messages", content=not_json, token=CLIENT, headers=json_type)
        assert (r.status, r.body["error"]["code"]) == (400, "invalid_json"), not_json  # a lone surrogate, NaN
    r = cluster.http.post(url, content=b"{}")
    assert (r.status, r.body["error"]["code"]) == (401, "unauthorized")
    r = cluster.http.post(url, content=b"{}", token="wrong")
    assert (r.status, r.body["error"]["code"]) == (403, "forbidden")
    r = cluster.http.post(f"{cluster.url(master)}/admin/release-master", content=b"{}", token=CLIENT)
    assert r.status == 403  # the client token is not an admin token
    assert _stored(cluster, master) == before + 1  # only the one valid batch item
    with pytest.raises(HorologeError) as e:
        cluster.client(0).request("GET", "/v1/messages/zzz")
    assert e.value.status == 404


def test_a_msgpack_produce_takes_raw_bytes_and_the_same_rules(cluster):
    """``Content-Type: application/msgpack``: every JSON case above gets the same answer in
    msgpack; a body may be raw bytes (not UTF-8 here), which a pull hands back as they were
    sent; what is not msgpack, or what JSON could not carry (NaN, an ext type, a bytes
    key), is refused; and nothing refused reaches the Raft log."""
    master = cluster.wait_leader()
    url = f"{cluster.url(master)}/v1/messages"
    packed = {"Content-Type": "application/msgpack"}
    before = _stored(cluster, master)
    for body, status, code, field in CASES:
        r = cluster.to_master(
            "POST", "/v1/messages", content=msgpack.packb(body), token=CLIENT, headers=packed
        )
        err = r.body["error"]
        assert (r.status, err["code"], err.get("field")) == (status, code, field), body
    nan = {"topic": "t", "body": "x", "deliver_at": float("nan")}
    refused = [
        (b"\xc1", "invalid_msgpack", None),  # a byte msgpack never uses
        (msgpack.packb({"topic": "t"}) + b"\x00", "invalid_msgpack", None),  # extra data
        (msgpack.packb({1: "t"}, strict_types=True), "invalid_msgpack", None),  # an int map key
        (msgpack.packb({b"topic": "t", "body": "x"}), "unknown_field", "b'topic'"),
        (msgpack.packb(nan), "invalid_field", "deliver_at"),
        (msgpack.packb({"topic": "t", "body": msgpack.ExtType(1, b"x")}), "invalid_field", "body"),
        (msgpack.packb({"topic": "t", "body": "x", "headers": {"a": b"bytes"}}), "invalid_field", "headers"),
    ]
    for raw, code, field in refused:
        r = cluster.to_master("POST", "/v1/messages", content=raw, token=CLIENT, headers=packed)
        assert (r.status, r.body["error"]["code"], r.body["error"].get("field")) == (400, code, field), raw
    assert _stored(cluster, master) == before
    binary = bytes(range(256))
    batch = {"messages": [{"topic": "raw", "body": binary}, {"topic": "raw", "body": 5}]}
    r = cluster.http.post(f"{url}/batch", content=msgpack.packb(batch), token=CLIENT, headers=packed)
    assert r.status == 200 and "id" in r.body["results"][0]
    assert r.body["results"][1]["error"]["field"] == "body"  # as JSON answers it
    client = cluster.client(master)
    sent = client.produce("raw", b"\xff\xfe sdk")  # the SDK sends produce in msgpack
    got: dict[str, bytes] = {}
    for _ in range(10):  # each pull returns what is due: the two may come apart
        got.update((m.id, m.body) for m in client.pull("raw", "g", max=10, wait_ms=3_000))
        if len(got) == 2:
            break
    assert got == {r.body["results"][0]["id"]: binary, sent.id: b"\xff\xfe sdk"}


def test_followers_redirect_writes_to_the_master(cluster):
    master = cluster.wait_leader()
    follower = next(i for i in cluster.indexes if i != master)
    r = cluster.http.post(f"{cluster.url(follower)}/v1/messages", {"topic": "t", "body": "x"}, token=CLIENT)
    assert r.status == 307
    assert r.headers["Location"] == f"http://127.0.0.1:{cluster.http_ports[master]}/v1/messages"


def test_requests_are_bounded_and_a_big_batch_is_split_across_entries(cluster):
    master = cluster.wait_leader()
    path = "/v1/messages/batch"
    before = _stored(cluster, master)
    r = cluster.to_master("POST", path, {"messages": [{"topic": "t", "body": "x"}] * 1001}, token=CLIENT)
    assert (r.status, r.body["error"]["code"], r.body["error"]["field"]) == (413, "too_large", "messages")
    huge = {"messages": [{"topic": "t", "body": "x" * 200_000} for _ in range(25)]}  # 5 MB
    r = cluster.to_master("POST", path, content=json.dumps(huge).encode(), token=CLIENT)
    assert (r.status, r.body["error"]["code"]) == (413, "too_large")
    assert _stored(cluster, master) == before

    # 3 MB in one request: three Raft entries or more, one answer, in the request's order
    applied = cluster.status(master)["applied_index"]
    later = int(time.time() * 1000) + 3_600_000
    items = [{"topic": "t", "body": "y" * 200_000, "deliver_at": later + k} for k in range(15)]
    results = cluster.produce(master, items)
    assert [r["deliver_at"] for r in results] == [later + k for k in range(15)]
    for k, r in enumerate(results):  # each id names the item at its place
        status = cluster.client(master).request("GET", f"/v1/messages/{r['id']}").body
        assert status["deliver_at"] == later + k
    assert _stored(cluster, master) == before + 15
    assert cluster.status(master)["applied_index"] >= applied + 3


FORECAST_REFUSALS = [
    ("bucket=2h", 400, "invalid_field", "bucket"),
    ("from=yesterday", 400, "invalid_field", "from"),
    ("from=2026-01-01T00:00:00", 400, "invalid_field", "from"),  # no zone
    ("from=2000&to=1000", 400, "invalid_range", "to"),
    ("bucket=1m&from=0&to=86400000000", 422, "out_of_range", "to"),  # 1.44M buckets
    ("topic=bad topic", 400, "invalid_field", "topic"),
    ("colour=red", 400, "unknown_field", "colour"),
]


def test_forecast_counts_pending_messages_and_refuses_bad_queries(cluster):
    master = cluster.wait_leader()
    c = Client([cluster.url(i) for i in cluster.indexes], CLIENT, retry_s=20)
    base = (int(time.time() * 1000) // 3_600_000 + 3) * 3_600_000  # an hour of its own, 2-3 h ahead
    items = [{"topic": "fc", "body": "x", "deliver_at": base + m * 60_000 + 5} for m in (0, 0, 1, 7)]
    ids = [s.id for s in c.produce_batch(items)]
    c.cancel(ids[1])
    f = c.forecast("fc", "1m", base, base + 10 * 60_000)
    assert (f.bucket, f.topic, f.before) == ("1m", "fc", 0)
    assert [n for _, n in f.buckets] == [1, 1, 0, 0, 0, 0, 0, 1, 0, 0]
    assert f.buckets[0][0] == base and f.buckets[-1][0] == base + 9 * 60_000
    hourly = c.forecast("fc", "1h", base - 3_600_000, base + 3_600_000)
    assert [n for _, n in hourly.buckets] == [0, 3]
    assert sum(n for _, n in c.forecast(None, "1d", base, base + 1).buckets) >= 3  # every topic
    args = ["forecast", "--url", cluster.url(master), "--token", CLIENT, "--topic", "fc", "--bucket", "1m"]
    shown = CliRunner().invoke(main, [*args, "--from", str(base), "--to", str(base + 120_000)])
    assert shown.exit_code == 0, shown.output
    assert [line.split()[-1] for line in shown.output.splitlines()[1:]] == ["1", "1"]
    applied = cluster.status(master)["applied_index"]
    for query, status, code, field in FORECAST_REFUSALS:
        r = cluster.to_master("GET", f"/v1/forecast?{query}", token=CLIENT)
        err = r.body["error"]
        assert (r.status, err["code"], err.get("field")) == (status, code, field), query
    assert cluster.status(master)["applied_index"] - applied <= 40  # wheel syncs only: no bad query proposes


PENDING_REFUSALS = [
    ("limit=0", 422, "out_of_range", "limit"),
    ("limit=1001", 422, "out_of_range", "limit"),
    ("limit=ten", 400, "invalid_field", "limit"),
    ("cursor=not-a-cursor", 400, "invalid_field", "cursor"),
    ("cursor=kQ", 400, "invalid_field", "cursor"),  # msgpack [1]: not a key
    ("with_body=yes", 400, "invalid_field", "with_body"),
    ("from=5&to=5", 400, "invalid_range", "to"),
    ("colour=red", 400, "unknown_field", "colour"),
]


def test_pending_lists_in_firing_order_a_page_at_a_time(cluster):
    master = cluster.wait_leader()
    c = Client([cluster.url(i) for i in cluster.indexes], CLIENT, retry_s=20)
    base = int(time.time() * 1000) + 7_200_000
    items = [
        {
            "topic": "pl",
            "body": f"m{k}",
            "deliver_at": base + (k * 37 % 11) * 1000,
            "key": f"k{k}",
            "tags": ["t"],
        }
        for k in range(25)
    ]
    ids = [s.id for s in c.produce_batch(items)]
    c.cancel(ids[3])
    want = sorted((base + (k * 37 % 11) * 1000, k) for k in range(25) if k != 3)  # same ms: arrival order
    seen, cursor = [], None
    while True:
        page = c.pending("pl", limit=7, cursor=cursor, with_body=True)
        seen += page.messages
        cursor = page.next_cursor
        if cursor is None:
            break
    assert [m.id for m in seen] == [ids[k] for _, k in want]
    assert [m.fires_at for m in seen] == [at for at, _ in want]
    assert [m.body for m in seen] == [f"m{k}".encode() for _, k in want]
    assert seen[0].key == f"k{want[0][1]}" and seen[0].tags == ("t",)
    window = c.pending("pl", base + 2000, base + 4000)
    assert [m.deliver_at for m in window.messages] == [
        at for at, _ in want if base + 2000 <= at < base + 4000
    ]
    assert window.messages[0].body is None  # bodies only when asked
    shown = CliRunner().invoke(
        main, ["pending", "--url", cluster.url(master), "--token", CLIENT, "--topic", "pl"]
    )
    assert shown.exit_code == 0 and [json.loads(x)["id"] for x in shown.output.splitlines()] == [
        m.id for m in seen
    ]
    for query, status, code, field in PENDING_REFUSALS:
        r = cluster.to_master("GET", f"/v1/topics/pl/pending?{query}", token=CLIENT)
        err = r.body["error"]
        assert (r.status, err["code"], err.get("field")) == (status, code, field), query


def test_what_the_fuzz_test_found_is_answered_and_halts_nothing(cluster):
    """Each of these was a 5xx, a halt, or an answer not in the JSON error shape."""
    master = cluster.wait_leader()
    url = cluster.url(master)
    for method in ("GET", "DELETE"):  # its hour is past year 9999: every replica halted
        r = cluster.to_master(method, "/v1/messages/2000000000000000", token=CLIENT)
        assert (r.status, r.body["error"]["code"]) == (404, "not_found"), r.text
    r = cluster.to_master("POST", "/admin/release-master", {"to": {}}, token=ADMIN)  # a 500
    assert (r.status, r.body["error"]["code"], r.body["error"]["field"]) == (400, "invalid_field", "to")
    r = cluster.http.get(f"{url}/v1/messages/batch", token=CLIENT)  # was 404, as if "batch" were an id
    assert (r.status, r.body["error"]["code"], r.headers["Allow"]) == (405, "method_not_allowed", "POST")
    r = cluster.http.get(f"{url}/v1/nothing", token=CLIENT)  # was text/plain
    assert (r.status, r.body["error"]["code"]) == (404, "not_found")
    cluster.produce(master, [{"topic": "t", "body": "after"}])
    cluster.catch_up(next(i for i in cluster.indexes if i != master), behind=0)
    assert [cluster.status(i)["halted"] for i in cluster.indexes] == [None, None, None]


def _raw(url: str, request: bytes) -> bytes:
    """``request`` sent as it is (bytes no HTTP client would send); the whole answer."""
    host, port = url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return answer


def test_a_body_nested_deep_or_a_token_not_utf8_is_refused_not_a_500(cluster):
    """Each was a 500 in plain text and a traceback in the log: JSON nested 600 deep on a
    route with a typed body (orjson reads 1,024 levels; the check of its numbers recursed
    past Python's limit), and an Authorization header with bytes that are not UTF-8."""
    master = cluster.wait_leader()
    deep = b'{"group": "g", "receipts": ' + b"[" * 600 + b"]" * 600 + b"}"
    json_type = {"Content-Type": "application/json"}
    r = cluster.to_master("POST", "/v1/topics/t/ack", content=deep, token=CLIENT, headers=json_type)
    assert (r.status, r.body["error"]["code"]) == (400, "invalid_body"), r.text
    body = b'{"deliver_at": ' + b"[" * 600 + b"]" * 600 + b"}"
    mid = cluster.client(master).produce("t", b"x", deliver_after="1h").id
    r = cluster.to_master("PATCH", f"/v1/messages/{mid}", content=body, token=CLIENT, headers=json_type)
    assert (r.status, r.body["error"]["code"]) == (400, "invalid_body"), r.text
    answer = _raw(
        cluster.url(master),
        b"GET /v1/forecast HTTP/1.1\r\nHost: n\r\nConnection: close\r\n"
        b"Authorization: Bearer \xff\xfe\r\n\r\n",
    )
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403 "), answer[:300]
    assert json.loads(body)["error"]["code"] == "forbidden"


@pytest.mark.parametrize("method", ["DELETE", "PATCH"])
def test_a_cancel_or_reschedule_by_key_checks_its_query_as_the_pending_list_does(cluster, method):
    """A topic that is no name, a key over 256 characters or a parameter no route knows
    went to Raft as a cancel or reschedule and came back 404 not_found."""
    body = {"deliver_after": "1h"} if method == "PATCH" else None
    for query, code, field in [
        ("topic=bad%20name&key=k", "invalid_field", "topic"),
        ("topic=t&key=" + "k" * 257, "invalid_field", "key"),
        ("topic=t&key=k&junk=1", "unknown_field", "junk"),
        ("topic=t&key=", "invalid_query", "key"),
    ]:
        r = cluster.to_master(method, f"/v1/messages?{query}", body, token=CLIENT)
        assert (r.status, r.body["error"]["code"], r.body["error"].get("field")) == (400, code, field), query
    r = cluster.to_master(method, "/v1/messages?topic=t&key=" + "k" * 256, body, token=CLIENT)
    assert (r.status, r.body["error"]["code"]) == (404, "not_found")  # a key of 256: looked up
