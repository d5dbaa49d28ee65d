"""``horologe node`` that cannot start says why in one line and exits 1 (a real process)."""

from __future__ import annotations

import socket
import subprocess
import sys

from testkit.process_cluster import free_ports


def test_a_taken_http_address_is_refused_in_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (raft,) = free_ports(1)
        http, raft = f"127.0.0.1:{port}", f"127.0.0.1:{raft}"
        args = ["--data-dir", str(tmp_path / "n1"), "--http", http, "--raft", raft]
        run = subprocess.run(
            [sys.executable, "-m", "horologe", "node", "--insecure-dev", "--node-id", "n1", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert run.returncode == 1, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("Error: ")]
    why = f"cannot listen for HTTP on {http}: Address already in use (http in the node config, or --http)"
    assert errors == [f"Error: {why}"]
    assert "Traceback" not in run.stderr and "serving the HTTP API" not in run.stderr
