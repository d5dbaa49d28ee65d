"""--log-format json: every line one JSON object; every answer and its access line carry
one request id; nothing secret is logged."""

from __future__ import annotations

import json
import re

from testkit.process_cluster import ADMIN, CLIENT
from testkit.waiting import wait_until


def test_json_logs_and_request_ids(make_cluster):
    cluster = make_cluster(extra_toml='log_format = "json"\n')
    master = cluster.wait_leader()
    follower = next(i for i in cluster.indexes if i != master)
    url = cluster.url(master)

    mine = cluster.http.post(
        f"{url}/v1/messages",
        {"topic": "t", "body": "x"},
        token=CLIENT,
        headers={"X-Request-Id": "order-42.a"},
    )
    assert mine.status == 201 and mine.headers["X-Request-Id"] == "order-42.a"
    fresh = cluster.http.get(f"{url}/v1/messages/no-such-id", token=CLIENT)
    assert fresh.status == 404 and re.fullmatch(r"[0-9a-f]{16}", fresh.headers["X-Request-Id"])
    insane = cluster.http.get(f"{url}/healthz", headers={"X-Request-Id": "a b\tc" + "x" * 100})
    assert re.fullmatch(r"[0-9a-f]{16}", insane.headers["X-Request-Id"])  # not echoed: a fresh one
    moved = cluster.http.post(
        f"{cluster.url(follower)}/v1/messages",
        {"topic": "t", "body": "y"},
        token=CLIENT,
        headers={"X-Request-Id": "moved-1"},
    )
    assert moved.status == 307 and moved.headers["X-Request-Id"] == "moved-1"
    assert cluster.http.get(f"{url}/admin/status", token=ADMIN).status == 200

    def access_lines(i: int) -> list[dict]:
        return [r for r in map(json.loads, cluster.log(i).splitlines()) if r["logger"] == "horologe.access"]

    wait_until(lambda: any(r.get("request_id") == "order-42.a" for r in access_lines(master)), 10)
    for i in (master, follower):
        text = cluster.log(i)
        records = [json.loads(line) for line in text.splitlines()]  # every line is one object
        assert records and all({"ts", "level", "logger", "msg", "node"} <= r.keys() for r in records)
        assert CLIENT not in text and ADMIN not in text
    by_id = {r["request_id"]: r for r in access_lines(master)}
    produced = by_id["order-42.a"]
    assert (produced["method"], produced["path"], produced["status"]) == ("POST", "/v1/messages", 201)
    assert produced["ms"] >= 0 and produced["peer"] == "127.0.0.1"
    assert by_id[fresh.headers["X-Request-Id"]]["status"] == 404
    assert next(r for r in access_lines(follower) if r["request_id"] == "moved-1")["status"] == 307
