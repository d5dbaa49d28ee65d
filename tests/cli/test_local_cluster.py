"""``horologe local-cluster`` survives a dead node: the README's walk-through, on real processes.

kill -9 of the master: the others go on, a new master delivers, and local-cluster says
which node died and how to bring it back; it restarts it by itself (``--restart
on-failure``) or on a SIGHUP, and says when it is back. Ctrl-C (SIGTERM) stops them all.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from horologe.client import Client
from testkit.process_cluster import ENV, free_port_run
from testkit.waiting import wait_until


class LocalCluster:
    """``horologe local-cluster`` as a user runs it, its output read line by line."""

    def __init__(self, data: str, *args: str) -> None:
        self.http_port, self.raft_port = free_port_run(3), free_port_run(3)
        self.urls = [f"http://127.0.0.1:{self.http_port + i}" for i in range(3)]
        cmd = [sys.executable, "-m", "horologe", "local-cluster", "--data", data, *args]
        cmd += ["--http-port", str(self.http_port), "--raft-port", str(self.raft_port)]
        self.proc = subprocess.Popen(
            cmd, env={**os.environ, **ENV}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.pids = {m[1]: int(m[2]) for m in self.expect_all(r"  (n\d)  \S+   pid (\d+)", 3)}

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def expect(self, pattern: str, timeout_s: float = 60.0) -> re.Match:
        """The next output line matching ``pattern``; fails with everything printed so far."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if m := re.search(pattern, line):
                return m
        out = "\n".join(self.seen)
        pytest.fail(f"local-cluster never printed /{pattern}/ in {timeout_s:g} s; it printed:\n{out}")

    def expect_all(self, pattern: str, n: int) -> list[re.Match]:
        return [self.expect(pattern) for _ in range(n)]

    def client(self, nodes=(0, 1, 2)) -> Client:
        return Client([self.urls[i] for i in nodes], ENV["HOROLOGE_CLIENT_TOKEN"], retry_s=20.0)

    def first_master(self) -> str:
        """The master local-cluster named when it started."""
        m = re.search(r"nodes up; master is (n\d)", "\n".join(self.seen))
        assert m, self.seen
        return m[1]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


@pytest.fixture
def cluster_factory(tmp_path):
    started: list[LocalCluster] = []

    def make(*args: str) -> LocalCluster:
        started.append(LocalCluster(str(tmp_path / "local"), *args))
        return started[-1]

    yield make
    for c in started:
        c.stop()


def deliver_one(c: LocalCluster, nodes, text: str) -> None:
    """A message due in 0.5 s through ``nodes`` is delivered (by whichever node is master)."""
    with c.client(nodes) as client:
        sent = client.produce("walk", text, deliver_after=500)

        def delivered() -> bool:
            """the message is delivered"""
            return client.status(sent.id).state == "delivered"

        wait_until(delivered, 20.0)


def test_kill_9_the_master_and_watch_it_heal(cluster_factory):
    c = cluster_factory("--restart", "on-failure", "--restart-delay", "2")
    c.expect(r"running \(pid \d+, --restart on-failure\)")
    master = c.first_master()
    k = int(master[1:]) - 1
    os.kill(c.pids[master], signal.SIGKILL)
    c.expect(rf"{master} \(pid {c.pids[master]}\) died: killed by SIGKILL\. The other nodes go on\.")
    c.expect(rf"restarting {master} in 2 s")
    others = [i for i in range(3) if i != k]
    deliver_one(c, others, "after the kill")  # a new master among the two left
    c.expect(rf"{master} restarted \(pid \d+\)")
    c.expect(rf"{master} is back: ready and linked; the master is n\d")
    deliver_one(c, [k], "after the restart")  # through the node that came back
    assert c.stop() == 0
    c.expect("stopping nodes")


def test_a_dead_node_stays_down_until_sighup(cluster_factory):
    c = cluster_factory()
    c.expect(r"running \(pid (\d+), --restart never\)")
    victim = next(n for n in ("n1", "n2", "n3") if n != c.first_master())
    os.kill(c.pids[victim], signal.SIGKILL)
    c.expect(rf"{victim} \(pid \d+\) died: killed by SIGKILL\. The other nodes go on\.")
    hint = c.expect(r"bring it back: kill -HUP (\d+)")
    assert int(hint[1]) == c.proc.pid
    deliver_one(c, [i for i in range(3) if f"n{i + 1}" != victim], "two of three")
    time.sleep(1.0)
    assert c.proc.poll() is None and c.lines.empty()  # no restart, no stop: it waits to be asked
    os.kill(c.proc.pid, signal.SIGHUP)
    restarted = int(c.expect(rf"{victim} restarted \(pid (\d+)\)")[1])
    c.expect(rf"{victim} is back: ready and linked")
    os.kill(restarted, signal.SIGTERM)  # stopped, not died ("died: exited with code 0")
    c.expect(rf"{victim} \(pid {restarted}\) stopped: it exited cleanly, as a node asked to stop does")
    c.expect(r"bring it back: kill -HUP")
    assert c.stop() == 0
    c.expect("stopping nodes")
    for pid in [*c.pids.values(), restarted]:  # every node process ended with it
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_the_demo_shows_five_deliveries_and_how_long_the_first_took(cluster_factory):
    c = cluster_factory("--demo", "--exit-after-demo", "--make-run-began", str(time.time() - 30))
    assert re.search(r"nodes up; master is n\d \(ready \d+\.\d s after start\)", "\n".join(c.seen))
    c.expect(r"delivered \S+  deliver_at=\d+  delivered_at=\d+  lateness=-?\d+ ms")
    first = c.expect(r"first delivery shown (\d+\.\d) s after make run began")
    took = float(first[1])
    assert 32 <= took < 90  # the 30 s before local-cluster started, then the start and the +2 s wait
    c.expect_all(r"delivered \S+ ", 4)
    c.expect("stopping nodes")
    assert c.proc.wait(30) == 0


def test_ports_in_use_are_named_before_any_node_starts(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "horologe", "local-cluster", "--data", str(tmp_path / "local")]
            + ["--nodes", "1", "--http-port", str(port), "--raft-port", str(free_port_run(1))],
            env={**os.environ, **ENV},
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert out.returncode == 1
    assert f"already in use on 127.0.0.1: port {port} (another local-cluster?)" in out.stderr
    assert not (tmp_path / "local").exists()  # nothing written, nothing started


@pytest.mark.parametrize("kill_node_first", [False, True])
def test_a_closed_output_does_not_leave_the_nodes_running(tmp_path, kill_node_first):
    """``local-cluster | head -2``, then Ctrl-C: its goodbye ("stopping nodes...") hit the
    closed pipe before it stopped the nodes, and they ran on without it. Or a node dies:
    what local-cluster says of it hit the closed pipe, with a traceback."""
    http, raft = free_port_run(1), free_port_run(1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "horologe", "local-cluster", "--data", str(tmp_path / "local"), "--nodes", "1"]
        + ["--http-port", str(http), "--raft-port", str(raft)],
        env={**os.environ, **ENV},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    node_pid = None
    try:
        for line in proc.stdout:
            if m := re.search(r"  n1  \S+   pid (\d+)", line):
                node_pid = int(m[1])
                break
        assert node_pid, "local-cluster never named its node"
        proc.stdout.close()  # as `head` exits
        if kill_node_first:  # local-cluster says so, into the closed pipe, and ends
            os.kill(node_pid, signal.SIGKILL)
        else:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert "Traceback" not in proc.stderr.read()
        _wait_until_gone(node_pid)
    finally:
        _kill_what_is_left(proc, node_pid)


def _wait_until_gone(node_pid: int) -> None:
    def node_gone() -> bool:
        """the node process ended"""
        try:
            os.kill(node_pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(node_gone, 15.0)


def _kill_what_is_left(proc: subprocess.Popen, node_pid: int | None) -> None:
    """A test that failed midway leaves no node and no local-cluster running."""
    if node_pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(node_pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.kill()


def test_ports_past_65535_are_refused_before_anything_starts(tmp_path):
    """A traceback (OverflowError from bind) before, once the nodes had been written."""
    from click.testing import CliRunner

    from horologe.cli import main

    for args, why in (
        (["--http-port", "70000"], "70000 is not in the range 1<=x<=65535"),
        (["--raft-port", "65534"], "3 nodes from port 65534 go past 65535"),
    ):
        r = CliRunner().invoke(main, ["local-cluster", "--data", str(tmp_path / "local"), *args])
        assert r.exit_code == 2 and why in r.output, r.output
    assert not (tmp_path / "local").exists()


def _local_cluster(data, *args: str) -> subprocess.CompletedProcess:
    """A second local-cluster run to its end (3 nodes on free ports unless ``args`` say)."""
    ports = ["--http-port", str(free_port_run(3)), "--raft-port", str(free_port_run(3))]
    return subprocess.run(
        [sys.executable, "-m", "horologe", "local-cluster", "--data", str(data), *ports, *args],
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_second_local_cluster_on_the_same_data_leaves_the_running_one_alone(cluster_factory, tmp_path):
    """It rewrote the running cluster's config files with its own ports, started nodes that
    could not take the data folders, and waited 30 s for them."""
    c = cluster_factory()
    c.expect("running")
    data = tmp_path / "local"
    configs = {p.name: p.read_text() for p in data.glob("n*.toml")}
    out = _local_cluster(data)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "is in use by running nodes: n1 (pid " in out.stderr, out.stderr
    assert "(another local-cluster?)" in out.stderr
    assert {p.name: p.read_text() for p in data.glob("n*.toml")} == configs
    assert c.proc.poll() is None
    deliver_one(c, (0, 1, 2), "still here")


def test_a_node_that_exits_at_start_is_named_with_the_end_of_its_log(tmp_path):
    """local-cluster waited its 30 s for a node that had exited at once, then said only
    that no node answered."""
    data = tmp_path / "local"
    data.mkdir()
    (data / "n2").write_text("not a folder")  # n2's data_dir
    out = _local_cluster(data)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "n2 exited with code 1 before the cluster was ready" in out.stderr, out.stderr
    assert "n2" in out.stderr.split("before the cluster was ready", 1)[1], out.stderr  # its log's end


def test_a_closed_terminal_does_not_leave_the_nodes_running(tmp_path):
    """The terminal closed (a window, an SSH session): its SIGHUP reached local-cluster,
    which restarts dead nodes on one and said so to the terminal; that write failed (EIO),
    and so did its goodbye, before it stopped the nodes, which ran on in their own
    sessions, holding the ports and data folders."""
    import pty

    http, raft = free_port_run(1), free_port_run(1)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "horologe", "local-cluster", "--data", str(tmp_path / "local"), "--nodes", "1"]
        + ["--http-port", str(http), "--raft-port", str(raft)],
        env={**os.environ, **ENV},
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    node_pid, out = None, b""
    try:
        deadline = time.monotonic() + 60
        while node_pid is None and time.monotonic() < deadline:
            out += os.read(master, 4096)
            if m := re.search(rb"  n1  \S+   pid (\d+)", out):
                node_pid = int(m[1])
        assert node_pid, out.decode(errors="replace")
        while b"running (pid" not in out:
            out += os.read(master, 4096)
        os.close(master)  # the terminal is gone ...
        proc.send_signal(signal.SIGHUP)  # ... and its hang-up comes
        proc.wait(30)
        _wait_until_gone(node_pid)
    finally:
        _kill_what_is_left(proc, node_pid)


def test_http_and_raft_ports_that_overlap_are_refused_before_anything_starts(tmp_path):
    """--http-port 7080 beside the default Raft ports 7081-7083: each port free alone, the
    nodes raced for 7081 and 7082, and one exited unable to listen."""
    from click.testing import CliRunner

    from horologe.cli import main

    r = CliRunner().invoke(main, ["local-cluster", "--data", str(tmp_path / "local"), "--http-port", "7080"])
    assert r.exit_code == 2 and "share 7081, 7082" in r.output, r.output
    assert not (tmp_path / "local").exists()
