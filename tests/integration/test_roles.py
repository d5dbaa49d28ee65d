"""Each node's ``/admin/status`` names its role: one master, the others followers."""

from __future__ import annotations

import subprocess
import sys

from testkit.process_cluster import ADMIN


def test_one_master_and_followers_in_status_the_cli_and_the_api_document(cluster):
    master = cluster.wait_leader()
    roles = [cluster.status(i)["role"] for i in cluster.indexes]
    assert roles == ["master" if i == master else "follower" for i in cluster.indexes]
    follower = next(i for i in cluster.indexes if i != master)
    out = subprocess.run(
        [sys.executable, "-m", "horologe", "status", "--url", cluster.url(follower), "--admin-token", ADMIN],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert '"role": "follower"' in out.stdout, out.stdout + out.stderr
    document = cluster.http.get(f"{cluster.url(master)}/openapi.json").result()
    role = document["components"]["schemas"]["Status"]["properties"]["role"]
    assert sorted(role["enum"]) == ["candidate", "follower", "master"]  # an enum's order means nothing
