"""Unauthenticated endpoints: health, readiness, metrics, route list."""

from __future__ import annotations

import json
import urllib.request


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.read()


def test_public_endpoints(cluster):
    master = cluster.wait_leader()
    url = cluster.url(master)
    assert _get(f"{url}/healthz")[0] == 200
    status, body = _get(f"{url}/readyz")
    assert status == 200 and json.loads(body)["leader"] == f"n{master + 1}"
    status, body = _get(f"{url}/metrics")
    assert status == 200 and b"horologe_is_master 1.0" in body and b"horologe_pending" in body
    assert b"horologe_loop_lag_p99_ms" in body and b"horologe_clock_offset_ms" in body
    status, body = _get(f"{url}/openapi.json")
    paths = json.loads(body)["paths"]
    assert paths["/v1/messages/{id}"]["delete"]["summary"].startswith("Cancel")
    assert {"/v1/messages", "/v1/messages/batch", "/admin/status", "/admin/release-master"} <= set(paths)
