"""Unauthenticated endpoints: health, readiness, metrics, route list."""

from __future__ import annotations


def test_public_endpoints(cluster):
    master = cluster.wait_leader()
    url = cluster.url(master)
    assert cluster.http.get(f"{url}/healthz").status == 200
    ready = cluster.http.get(f"{url}/readyz")
    assert ready.status == 200 and ready.body["leader"] == f"n{master + 1}"
    metrics = cluster.http.get(f"{url}/metrics")
    assert (
        metrics.status == 200
        and "horologe_is_master 1.0" in metrics.text
        and "horologe_pending" in metrics.text
    )
    assert "horologe_loop_lag_p99_seconds" in metrics.text and "horologe_clock_offset_seconds" in metrics.text
    paths = cluster.http.get(f"{url}/openapi.json").result()["paths"]
    assert paths["/v1/messages/{id}"]["delete"]["summary"].startswith("Cancel")
    assert {"/v1/messages", "/v1/messages/batch", "/admin/status", "/admin/release-master"} <= set(paths)
