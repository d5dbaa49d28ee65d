"""``horologe node`` that cannot start says why in one line and exits 1 (a real process)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from horologe.node.data_lock import lock_data_dir
from testkit.process_cluster import ENV, free_ports


def test_a_taken_http_address_is_refused_in_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (raft,) = free_ports(1)
        http, raft = f"127.0.0.1:{port}", f"127.0.0.1:{raft}"
        run = _start(tmp_path / "n1", http, raft)
    why = f"cannot listen for HTTP on {http}: Address already in use (http in the node config, or --http)"
    assert _errors(run) == [f"Error: {why}"]
    assert "serving the HTTP API" not in run.stderr


def _start(data_dir, http: str, raft: str) -> subprocess.CompletedProcess:
    """``horologe node`` (n1, no secrets) run to its end."""
    args = ["--data-dir", str(data_dir), "--http", http, "--raft", raft]
    return subprocess.run(
        [sys.executable, "-m", "horologe", "node", "--insecure-dev", "--node-id", "n1", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _errors(run: subprocess.CompletedProcess) -> list[str]:
    """Its lines that say why it stopped, having checked it stopped with 1 and no traceback."""
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    return [line for line in run.stderr.splitlines() if line.startswith("Error: ")]


def test_a_second_node_process_on_a_data_dir_in_use_is_refused_in_one_line(tmp_path):
    """Two processes on one folder would both append to its journal and store: the second
    is refused (node/data_lock.py), the first serves on; once it ends, the folder is free."""
    data = tmp_path / "n1"

    def node(*more: str) -> list[str]:
        http, raft = (f"127.0.0.1:{p}" for p in free_ports(2))
        args = ["--data-dir", str(data), "--http", http, "--raft", raft, *more]
        return [sys.executable, "-m", "horologe", "node", "--insecure-dev", "--node-id", "n1", *args]

    first = subprocess.Popen(node(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not (data / "lock").exists() or (data / "lock").read_text().strip() != str(first.pid):
            assert time.monotonic() < deadline and first.poll() is None, "the first node did not start"
            time.sleep(0.05)
        second = subprocess.run(node(), capture_output=True, text=True, timeout=60)
        assert second.returncode == 1, second.stderr
        errors = [line for line in second.stderr.splitlines() if line.startswith("Error: ")]
        assert errors == [
            f"Error: refusing to start: data_dir {data} is in use by another node process (pid {first.pid})"
        ]
        assert "Traceback" not in second.stderr and first.poll() is None
    finally:
        first.kill()  # SIGKILL: nothing cleaned up, and the kernel lets go of the lock
        first.wait(30)
    os.close(lock_data_dir(str(data)))


def test_a_taken_raft_address_is_said_and_taken_once_free(tmp_path):
    """pysyncobj binds the Raft address again every second and kept each failure to
    itself: the node waited, never linked, without a word (cluster/raft/seam.py)."""
    http, raft_port = free_ports(2)
    raft = f"127.0.0.1:{raft_port}"
    log = tmp_path / "n1.log"

    def said(text: str) -> bool:
        deadline = time.monotonic() + 20
        while text not in log.read_text():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    taken = socket.socket()
    taken.bind(("127.0.0.1", raft_port))
    taken.listen()
    args = ["--data-dir", str(tmp_path / "n1"), "--http", f"127.0.0.1:{http}", "--raft", raft]
    with open(log, "w") as out:
        node = subprocess.Popen(
            [sys.executable, "-m", "horologe", "node", "--insecure-dev", "--node-id", "n1", *args],
            stdout=out,
            stderr=out,
        )
    try:
        assert said(f"cannot listen for Raft on {raft}: [Errno 98] Address already in use; trying again"), (
            log.read_text()
        )
        taken.close()
        assert said(f"listening for Raft on {raft}"), log.read_text()
        assert log.read_text().count("cannot listen for Raft") == 1  # once for each kind of failure
    finally:
        taken.close()
        node.kill()
        node.wait(30)


def _listening(port: int) -> set[str]:
    """The local addresses something listens on at TCP ``port`` (IPv4, /proc/net/tcp)."""
    found = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            host, at = local.split(":")
            if state == "0A" and int(at, 16) == port:  # 0A: LISTEN
                found.add(socket.inet_ntoa(bytes.fromhex(host)[::-1]))
    return found


def test_where_raft_listens_is_said_and_a_local_cluster_listens_on_loopback_only(tmp_path):
    """With no raft_bind, pysyncobj listens on every interface, and --check-config said
    the raft address; local-cluster, which says it runs on 127.0.0.1, listened on all."""
    from horologe import local_cluster

    http, raft = free_ports(2)
    (config,) = local_cluster.write_configs(str(tmp_path), [http], [raft])
    check = subprocess.run(
        [sys.executable, "-m", "horologe", "node", "--config", config, "--check-config"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **ENV},
    )
    assert check.returncode == 0, check.stderr
    assert f"raft 127.0.0.1:{raft} (listening on 127.0.0.1:{raft})" in check.stdout
    args = ["--data-dir", str(tmp_path / "n9"), "--http", f"127.0.0.1:{http}", "--raft", f"127.0.0.1:{raft}"]
    bare = subprocess.run(
        [
            sys.executable,
            "-m",
            "horologe",
            "node",
            "--insecure-dev",
            "--node-id",
            "n9",
            *args,
            "--check-config",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert f"raft 127.0.0.1:{raft} (listening on 0.0.0.0:{raft})" in bare.stdout, bare.stdout + bare.stderr
    node = subprocess.Popen(
        [sys.executable, "-m", "horologe", "node", "--config", config],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **ENV},
    )
    try:
        deadline = time.monotonic() + 30
        while not _listening(raft):
            assert time.monotonic() < deadline and node.poll() is None, "the node did not listen"
            time.sleep(0.05)
        assert _listening(raft) == {"127.0.0.1"}
    finally:
        node.kill()
        node.wait(30)


def test_a_data_dir_that_is_a_file_is_refused_in_one_line(tmp_path):
    """It ended in a FileExistsError traceback."""
    (tmp_path / "n1").write_text("not a folder")
    run = _start(tmp_path / "n1", *(f"127.0.0.1:{p}" for p in free_ports(2)))
    assert _errors(run) == [f"Error: refusing to start: data_dir {tmp_path / 'n1'} is a file, not a folder"]
