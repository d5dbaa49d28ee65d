"""What ``horologe local-cluster`` does while it runs: it watches its node processes.

When a node exits, the others go on. It says which node died and how (its exit code or
the signal that killed it), and how to bring it back. It restarts dead nodes on request,
a SIGHUP to local-cluster, or by itself under ``--restart on-failure`` (a node that
exited with an error or by a signal, after a short delay). A restarted node is announced
again once it is ready and linked to the others: the failover can be watched healing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable

from horologe import local_cluster as lc
from horologe.client import HorologeError, RawClient

RESTART_POLICIES = ("never", "on-failure")


def how_it_ended(returncode: int) -> str:
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exited with code {returncode}"


class Supervisor:
    def __init__(
        self,
        procs: list[subprocess.Popen],
        configs: list[str],
        env: dict[str, str],
        log_dir: str,
        urls: list[str],
        *,
        restart: str = "never",
        delay_s: float = 3.0,
        echo: Callable[[str], None] = print,
    ) -> None:
        if restart not in RESTART_POLICIES:
            raise ValueError(f"restart policy {restart!r} is not one of {RESTART_POLICIES}")
        self.procs, self.configs, self.env, self.log_dir, self.urls = procs, configs, env, log_dir, urls
        self.restart, self.delay_s, self.echo = restart, delay_s, echo
        self.down: dict[int, float | None] = {}  # dead node -> when to restart it (None: on request)
        self.rejoining: set[int] = set()
        self._requested = False

    def request_restart(self, *_signal) -> None:
        """SIGHUP: restart every dead node at the next tick (a signal handler: it only notes it)."""
        self._requested = True

    def run(self, interval_s: float = 0.5) -> None:
        """Watch until interrupted (Ctrl-C or SIGTERM raise KeyboardInterrupt in the caller)."""
        with RawClient(timeout=2.0) as http:
            while True:
                self.tick(http)
                time.sleep(interval_s)

    def tick(self, http: RawClient) -> None:
        now = time.monotonic()
        for i, p in enumerate(self.procs):
            if i not in self.down and p.poll() is not None:
                self._report(i, p, now)
        if self._requested:
            self._requested = False
            if not self.down:
                self.echo("SIGHUP: every node is running")
            self.down = dict.fromkeys(self.down, now)
        for i, at in list(self.down.items()):
            if at is not None and now >= at:
                del self.down[i]
                self.procs[i] = lc.start_node(self.configs[i], self.env, self.log_dir)
                self.rejoining.add(i)
                self.echo(f"n{i + 1} restarted (pid {self.procs[i].pid}); waiting until it is ready")
        for i in sorted(self.rejoining):
            leader = self._ready(http, i)
            if leader is not None:
                self.rejoining.discard(i)
                self.echo(f"n{i + 1} is back: ready and linked; the master is {leader}")

    def _report(self, i: int, p: subprocess.Popen, now: float) -> None:
        self.rejoining.discard(i)
        log = os.path.join(self.log_dir, f"n{i + 1}.log")
        if p.returncode == 0:
            how = "stopped: it exited cleanly, as a node asked to stop does (SIGTERM or SIGINT)"
        else:
            how = f"died: {how_it_ended(p.returncode)}"
        self.echo(f"n{i + 1} (pid {p.pid}) {how}. The other nodes go on.")
        if self.restart == "on-failure" and p.returncode != 0:
            self.down[i] = now + self.delay_s
            self.echo(f"  restarting n{i + 1} in {self.delay_s:g} s (--restart on-failure); its log: {log}")
        else:
            self.down[i] = None
            self.echo(
                f"  bring it back: kill -HUP {os.getpid()}  (restarts every dead node; its log: {log});"
                " or run local-cluster with --restart on-failure"
            )

    def _ready(self, http: RawClient, i: int) -> str | None:
        """The master node i names once it answers /readyz with 200 and every link up, else None."""
        try:
            reply = http.get(f"{self.urls[i]}/readyz")
        except HorologeError:
            return None
        body = reply.body
        if reply.status != 200 or not isinstance(body, dict) or not all(body.get("links", {}).values()):
            return None
        return body.get("leader")
