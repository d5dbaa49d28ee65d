"""Bad input is refused with the JSON error shape, the right status, and nothing reaches Raft."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from horologe.http_client import ApiCallError, call
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


def _stored(cluster) -> int:
    return call("GET", f"{cluster.url(0)}/admin/status", ADMIN)[1]["counters"]["stored"]


def _raw(url: str, data: bytes, headers: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_bad_input_is_refused_and_never_proposed(cluster):
    master = cluster.wait_leader()
    url = f"{cluster.url(master)}/v1/messages"
    before = _stored(cluster)
    for body, status, code, field in CASES:
        with pytest.raises(ApiCallError) as e:
            call("POST", url, CLIENT, body, retry_s=0)
        err = e.value.body["error"]
        assert (e.value.status, err["code"], err.get("field")) == (status, code, field), body
    status, res = call(
        "POST", f"{url}/batch", CLIENT, {"messages": [CASES[0][0], {"topic": "t", "body": "ok"}]}
    )
    assert status == 200 and "error" in res["results"][0] and "id" in res["results"][1]
    code, res = _raw(
        url, b"{not json", {"Authorization": f"Bearer {CLIENT}", "Content-Type": "application/json"}
    )
    assert (code, res["error"]["code"]) == (400, "invalid_json")
    code, res = _raw(url, b"{}", {})
    assert (code, res["error"]["code"]) == (401, "unauthorized")
    code, res = _raw(url, b"{}", {"Authorization": "Bearer wrong"})
    assert (code, res["error"]["code"]) == (403, "forbidden")
    code, res = _raw(
        f"{cluster.url(master)}/admin/release-master", b"{}", {"Authorization": f"Bearer {CLIENT}"}
    )
    assert code == 403  # the client token is not an admin token
    assert _stored(cluster) == before + 1  # only the one valid batch item
    with pytest.raises(ApiCallError) as e:
        call("GET", f"{cluster.url(0)}/v1/messages/zzz", CLIENT, retry_s=0)
    assert e.value.status == 404


def test_followers_redirect_writes_to_the_master(cluster):
    master = cluster.wait_leader()
    follower = next(i for i in cluster.indexes if i != master)
    req = urllib.request.Request(
        f"{cluster.url(follower)}/v1/messages",
        method="POST",
        data=b'{"topic": "t", "body": "x"}',
        headers={"Authorization": f"Bearer {CLIENT}"},
    )

    class NoFollow(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.build_opener(NoFollow).open(req, timeout=5)
    assert e.value.code == 307
    assert e.value.headers["Location"] == f"http://127.0.0.1:{cluster.http_ports[master]}/v1/messages"


def test_requests_are_bounded_and_a_big_batch_is_split_across_entries(cluster):
    master = cluster.wait_leader()
    url = f"{cluster.url(master)}/v1/messages/batch"
    before = _stored(cluster)
    with pytest.raises(ApiCallError) as e:
        call("POST", url, CLIENT, {"messages": [{"topic": "t", "body": "x"}] * 1001}, retry_s=0)
    assert (e.value.status, e.value.body["error"]["code"], e.value.body["error"]["field"]) == (
        413,
        "too_large",
        "messages",
    )
    huge = {"messages": [{"topic": "t", "body": "x" * 200_000} for _ in range(25)]}  # 5 MB
    code, res = _raw(url, json.dumps(huge).encode(), {"Authorization": f"Bearer {CLIENT}"})
    assert (code, res["error"]["code"]) == (413, "too_large")
    assert _stored(cluster) == before

    # 3 MB in one request: three Raft entries or more, one answer, in the request's order
    applied = cluster.status(master)["applied_index"]
    later = int(time.time() * 1000) + 3_600_000
    items = [{"topic": "t", "body": "y" * 200_000, "deliver_at": later + k} for k in range(15)]
    results = call("POST", url, CLIENT, {"messages": items})[1]["results"]
    assert [r["deliver_at"] for r in results] == [later + k for k in range(15)]
    for k, r in enumerate(results):  # each id names the item at its place
        status = call("GET", f"{cluster.url(master)}/v1/messages/{r['id']}", CLIENT)[1]
        assert status["deliver_at"] == later + k
    assert _stored(cluster) == before + 15
    assert cluster.status(master)["applied_index"] >= applied + 3
