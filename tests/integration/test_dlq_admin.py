"""GET /admin/dlq/{group} and POST /admin/dlq/{group}/requeue on a live cluster, and the
Horologe-Forward-To header the dashboard reaches the other nodes with."""

from __future__ import annotations

import time

from horologe.client import Client
from testkit.process_cluster import ADMIN, CLIENT

NO_RETRIES = "retry_levels_ms = []\n"  # a nack goes straight to the DLQ
FORWARD = "Horologe-Forward-To"


def dead_letters(cluster, group: str, bodies: list[str]) -> tuple[Client, list]:
    """Produce ``bodies`` to "jobs", pull them as ``group`` and nack them into its DLQ."""
    c = Client([cluster.url(i) for i in cluster.indexes], CLIENT, admin_token=ADMIN, retry_s=20)
    c.produce_batch([{"topic": "jobs", "body": b, "tags": ["t1"], "headers": {"h": b}} for b in bodies])
    got: list = []
    deadline = time.monotonic() + 20
    while len(got) < len(bodies) and time.monotonic() < deadline:
        got += c.pull("jobs", group, max=100, wait_ms=500)
    assert len(got) == len(bodies)
    assert c.nack("jobs", group, [m.receipt for m in got]) == {"retried": 0, "dead_lettered": len(bodies)}
    return c, got


def drain_ids(c: Client, topic: str, group: str, idle_s: float = 1.5) -> list[str]:
    seen, quiet_since = [], time.monotonic()
    while time.monotonic() - quiet_since < idle_s:
        batch = c.pull(topic, group, max=100, wait_ms=300)
        if batch:
            quiet_since = time.monotonic()
            seen += batch
            c.ack(topic, group, [m.receipt for m in batch])
    return seen


def peek(c: Client, group: str, query: str = "") -> dict:
    return c.request("GET", f"/admin/dlq/{group}{query}", admin=True).body


def test_peek_pages_without_leasing_and_requeue_sends_back_once(make_cluster):
    cluster = make_cluster(extra_toml=NO_RETRIES)
    c, got = dead_letters(cluster, "g", ["a", "b", "c"])
    ids = [m.id for m in got]

    page = peek(c, "g")
    assert [m["position"] for m in page["messages"]] == [0, 1, 2]
    assert [m["body"] for m in page["messages"]] == ["a", "b", "c"]
    assert {m["id"] for m in page["messages"]} == set(ids)
    first = page["messages"][0]
    assert first["topic"] == "jobs" and first["tags"] == ["t1"] and first["headers"] == {"h": "a"}
    assert "receipt" not in first
    assert page["unacked"] == 3 and page["next_after"] is None

    part = peek(c, "g", "?limit=2")
    assert [m["position"] for m in part["messages"]] == [0, 1] and part["next_after"] == 1
    rest = peek(c, "g", f"?after={part['next_after']}")
    assert [m["position"] for m in rest["messages"]] == [2] and rest["next_after"] is None

    # Nothing was leased: a consumer of the DLQ still gets all three at once.
    held = c.pull("%DLQ%g", "g", max=10, wait_ms=2_000)
    assert sorted(m.body for m in held) == [b"a", b"b", b"c"]

    one = page["messages"][1]
    # Held by that consumer: left to it, not sent back beside it.
    r = c.request("POST", "/admin/dlq/g/requeue", {"ids": [one["id"]]}, admin=True).body
    assert r["requeued"] == [] and r["leased"] == [one["id"]] and r["remaining"] == 3
    assert c.release("%DLQ%g", "g", [m.receipt for m in held]) == 3
    r = c.request("POST", "/admin/dlq/g/requeue", {"ids": [one["id"]]}, admin=True).body
    assert [(m["id"], m["position"], m["topic"]) for m in r["requeued"]] == [(one["id"], 1, "jobs")]
    assert r["missing"] == [] and r["expired"] == [] and r["remaining"] == 2
    new_id = r["requeued"][0]["new_id"]
    assert new_id not in ids
    assert [m["position"] for m in peek(c, "g")["messages"]] == [0, 2]  # acked in the DLQ

    # It is keyed: a requeue sent again after its produce committed gets the same message back.
    again = c.produce("jobs", "b", key=f"requeue:g:{one['id']}")
    assert again.id == new_id
    # Acked already: the second requeue finds nothing, and says so.
    r2 = c.request("POST", "/admin/dlq/g/requeue", {"ids": [one["id"]]}, admin=True).body
    assert r2["requeued"] == [] and r2["missing"] == [one["id"]] and r2["remaining"] == 2

    back = drain_ids(c, "jobs", "g")
    assert [(m.id, m.body, m.attempt, m.tags, m.headers) for m in back] == [
        (new_id, b"b", 0, ("t1",), {"h": "b"})
    ]

    r3 = c.request("POST", "/admin/dlq/g/requeue", {"all": True}, admin=True).body
    assert sorted(m["position"] for m in r3["requeued"]) == [0, 2] and r3["remaining"] == 0
    assert peek(c, "g") == {"group": "g", "messages": [], "next_after": None, "unacked": 0}
    assert sorted(m.body for m in drain_ids(c, "jobs", "g")) == [b"a", b"c"]


BAD = [
    ("GET", "/admin/dlq/g?limit=0", None, 422, "out_of_range", "limit"),
    ("GET", "/admin/dlq/g?limit=1001", None, 422, "out_of_range", "limit"),
    ("GET", "/admin/dlq/g?limit=abc", None, 400, "invalid_field", "limit"),
    ("GET", "/admin/dlq/g?after=-1", None, 400, "invalid_field", "after"),
    ("GET", "/admin/dlq/g?cursor=3", None, 400, "unknown_field", "cursor"),
    ("GET", "/admin/dlq/.g", None, 400, "invalid_field", "group"),
    ("POST", "/admin/dlq/g/requeue", {}, 400, "invalid_field", "ids"),
    ("POST", "/admin/dlq/g/requeue", {"ids": ["xyz"]}, 400, "invalid_field", "ids"),
    ("POST", "/admin/dlq/g/requeue", {"ids": []}, 400, "invalid_field", "ids"),
    ("POST", "/admin/dlq/g/requeue", {"all": False}, 400, "invalid_field", "all"),
    ("POST", "/admin/dlq/g/requeue", {"all": True, "ids": ["0" * 16]}, 400, "invalid_field", "ids"),
    ("POST", "/admin/dlq/g/requeue", {"all": True, "x": 1}, 400, "unknown_field", "x"),
    ("POST", "/admin/dlq/g/requeue", [1], 400, "invalid_body", None),
]


def test_bad_input_is_sent_to_the_master_and_refused_there_in_the_error_shape(cluster):
    """A follower redirects a master-only call before it reads the call (docs/api.md); the
    master refuses the bad input."""
    master = cluster.wait_leader()
    follower = next(i for i in cluster.indexes if i != master)
    for method, path, body, status, code, field in BAD:
        sent = cluster.http.request(method, f"{cluster.url(follower)}{path}", body, token=ADMIN)
        assert sent.status == 307 and sent.headers["location"] == f"{cluster.url(master)}{path}", (path, body)
        r = cluster.http.request(method, sent.headers["location"], body, token=ADMIN)
        assert r.status == status, (path, body, r.text)
        want = {"code": code, "message": r.body["error"]["message"]}
        if field is not None:
            want["field"] = field
        assert r.body == {"error": want}, (path, body)
    bad_json = cluster.to_master("POST", "/admin/dlq/g/requeue", content=b"{", token=ADMIN)
    assert bad_json.status == 400 and bad_json.body["error"]["code"] == "invalid_json"


def test_dlq_routes_take_the_admin_token(cluster):
    url = f"{cluster.url(cluster.wait_leader())}/admin/dlq/g"
    assert cluster.http.get(url).status == 401
    assert cluster.http.get(url, token=CLIENT).status == 403
    assert cluster.http.post(f"{url}/requeue", {"all": True}, token=CLIENT).status == 403
    assert cluster.to_master("GET", "/admin/dlq/g", token=ADMIN).body["unacked"] == 0


def test_forward_header_reaches_the_named_node_or_the_master(cluster):
    master = cluster.wait_leader()
    a, b = (i for i in cluster.indexes if i != master)
    http, url = cluster.http, cluster.url(a)

    def status(to: str, token: str = ADMIN):
        return http.get(f"{url}/admin/status", token=token, headers={FORWARD: to})

    assert status(f"n{b + 1}").body["node_id"] == f"n{b + 1}"
    traced = http.get(
        f"{url}/admin/status", token=ADMIN, headers={FORWARD: f"n{b + 1}", "X-Request-Id": "fwd-trace-1"}
    )
    assert traced.headers["X-Request-Id"] == "fwd-trace-1"
    # The target logs the call under the same id (its access log is on by default).
    until_logged = time.monotonic() + 5
    while "id fwd-trace-1" not in cluster.log(b) and time.monotonic() < until_logged:
        time.sleep(0.05)
    assert "id fwd-trace-1" in cluster.log(b)
    assert status(f"n{a + 1}").body["node_id"] == f"n{a + 1}"  # itself: served here
    assert status("master").body["node_id"] == f"n{master + 1}"
    assert status(f"n{b + 1}", CLIENT).status == 403  # checked here, as any call
    bad = status("n9")
    assert bad.status == 422 and bad.body["error"]["code"] == "unknown_node"

    # A master-only call forwarded to a follower: 503, never a 307 for the browser to follow.
    r = http.get(f"{url}/admin/dlq/g", token=ADMIN, headers={FORWARD: f"n{b + 1}"})
    assert r.status == 503 and r.body["error"]["code"] == "no_master" and r.body["leader"] is None
    assert f"the master is {cluster.url(master).split('//')[1]}" in r.body["error"]["message"], r.body
    r = http.get(f"{url}/admin/dlq/g", token=ADMIN, headers={FORWARD: "master"})
    assert r.status == 200 and r.body["group"] == "g"

    # A write goes through with its body, and the public /metrics without a token.
    produced = http.post(
        f"{url}/v1/messages", {"topic": "fwd", "body": "x"}, token=CLIENT, headers={FORWARD: "master"}
    )
    assert produced.status == 201 and produced.body["topic"] == "fwd"
    text = http.get(f"{url}/metrics", headers={FORWARD: "master"}).text
    assert "horologe_is_master 1.0" in text


def test_requeue_of_an_id_no_store_could_hold_reports_it_missing(cluster):
    """Found by the fuzz test: an id whose hour is past year 9999 was a 500."""
    r = cluster.to_master("POST", "/admin/dlq/g/requeue", {"ids": ["ffffffff00000000"]}, token=ADMIN)
    assert (r.status, r.body["missing"], r.body["requeued"]) == (200, ["ffffffff00000000"], [])


def test_requeue_takes_the_id_the_peek_shows_for_a_rescheduled_message_and_its_retry(make_cluster):
    """A rescheduled message, and a retry of one, answer to their original's id, and the
    peek shows that id: requeue matched only the stored copy's id, and said it was missing."""
    cluster = make_cluster(extra_toml="retry_levels_ms = [100]\n")
    c = Client([cluster.url(i) for i in cluster.indexes], CLIENT, admin_token=ADMIN, retry_s=20)
    ids = [c.produce("jobs", body, deliver_after=60_000).id for body in ("moved", "moved-retried")]
    for mid in ids:
        c.reschedule(mid, deliver_after=0)
    got: list = []
    deadline = time.monotonic() + 20
    while len(got) < 2 and time.monotonic() < deadline:
        got += c.pull("jobs", "g", max=10, wait_ms=500)
    by_body = {m.body: m for m in got}
    assert [m.id for m in (by_body[b"moved"], by_body[b"moved-retried"])] == ids
    c.nack("jobs", "g", [by_body[b"moved"].receipt], dead_letter=True)
    c.nack("jobs", "g", [by_body[b"moved-retried"].receipt])  # its retry, 100 ms later ...
    retried: list = []
    while not retried and time.monotonic() < deadline + 10:
        retried = c.pull("jobs", "g", max=10, wait_ms=500)
    (retry,) = retried
    assert (retry.id, retry.attempt) == (ids[1], 1)
    c.nack("jobs", "g", [retry.receipt], dead_letter=True)  # ... dead-lettered
    assert sorted(m["id"] for m in peek(c, "g")["messages"]) == sorted(ids)
    r = c.request("POST", "/admin/dlq/g/requeue", {"ids": ids}, admin=True).body
    assert sorted(m["id"] for m in r["requeued"]) == sorted(ids), r
    assert r["missing"] == [] and r["remaining"] == 0
    back = drain_ids(c, "jobs", "g")  # new messages, under their new ids
    assert sorted(m.id for m in back) == sorted(m["new_id"] for m in r["requeued"])
