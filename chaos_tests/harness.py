"""Three real node processes behind toxiproxy, with per-node clock skew through libfaketime."""

from __future__ import annotations

import glob
import os

from testkit.process_cluster import Cluster, free_port_beside, free_ports, lowest_free_ports

from .topology import Topology
from .toxiproxy_server import ToxiproxyServer

FAKETIME_LIBS = "/usr/lib/*/faketime/libfaketimeMT.so.1"  # Debian's `faketime` package
FAKETIME_KEYS = ("LD_PRELOAD", "FAKETIME", "FAKETIME_TIMESTAMP_FILE", "FAKETIME_CACHE_DURATION")


def _libfaketime() -> str:
    libs = glob.glob(FAKETIME_LIBS)
    if not libs:
        raise RuntimeError("libfaketime is missing: apt-get install faketime (make test does)")
    return libs[0]


def faketime_env(offset_s: int) -> dict[str, str]:
    """Environment that starts a process with its clocks ``offset_s`` seconds off.

    Monotonic clocks are shifted too: with ``FAKETIME_DONT_FAKE_MONOTONIC=1``, libfaketime
    0.9.10 makes Python's ``time.sleep`` fail with EINVAL. A constant shift of a
    monotonic clock changes no timeout, so only the wall clock is skewed in effect.
    """
    return {"LD_PRELOAD": _libfaketime(), "FAKETIME": f"{offset_s:+d}s"}


def stepped_clock_env(path: str) -> dict[str, str]:
    """Environment whose clocks follow the offset written in ``path`` (re-read every second).

    Writing ``+3600s`` there steps the process's clocks an hour ahead while it runs, as a
    bad NTP server or an operator's ``date -s`` would (the monotonic clock steps too: see
    :func:`faketime_env`).
    """
    return {"LD_PRELOAD": _libfaketime(), "FAKETIME_TIMESTAMP_FILE": path, "FAKETIME_CACHE_DURATION": "1"}


class ChaosCluster(Cluster):
    """A :class:`Cluster` whose Raft and client links all pass through toxiproxy."""

    def __init__(
        self,
        root: str,
        toxiproxy: ToxiproxyServer,
        nodes: int = 3,
        extra_toml: str = "",
        data_root: str | None = None,
    ) -> None:
        # A joiner's Raft address must sort above every other's (Topology.add_node): the
        # first nodes take the lowest ports, and each joiner the next free one above.
        http, raft = free_ports(nodes), lowest_free_ports(nodes)
        self.topology = Topology.create(toxiproxy.client, http, raft)
        super().__init__(
            root,
            nodes,
            extra_toml,
            ports=(http, raft),
            peer_fields=self.topology.peer_fields,
            data_root=data_root,
        )

    def joiner(self, peers: list[int], raft_port: int | None = None) -> int:
        ours = [*self.http_ports, *self.raft_ports]
        return super().joiner(peers, raft_port or free_port_beside(max(self.raft_ports), True, ours))

    def _joiner_ports(self, i: int) -> None:
        """A joining node's links pass through proxies too (Topology.add_node)."""
        if self.topology.add_node(self.http_ports[i], self.raft_ports[i]) != i:
            raise RuntimeError(f"n{i + 1}'s proxies were made for another node")

    def member_http(self, i: int) -> str:
        return self.topology.http[i].listen

    @property
    def client_urls(self) -> list[str]:
        """What clients are given: every node, through its proxy."""
        return [self.topology.http_url(i) for i in self.indexes]

    def skew(self, i: int, offset_s: int) -> None:
        """Node i's clock runs ``offset_s`` off from its next start (0: the true clock)."""
        env = self.env.setdefault(i, {})
        for key in FAKETIME_KEYS:
            env.pop(key, None)
        if offset_s:
            env.update(faketime_env(offset_s))

    def steppable(self, i: int) -> None:
        """Node i's clock can be stepped with :meth:`step` from its next start."""
        self.skew(i, 0)
        self.step(i, 0)
        self.env.setdefault(i, {}).update(stepped_clock_env(self._step_file(i)))

    def step(self, i: int, offset_s: int) -> None:
        """Set node i's clock ``offset_s`` off the true one, now (it reads it within 1 s)."""
        with open(self._step_file(i), "w") as f:
            f.write(f"{offset_s:+d}s\n")

    def _step_file(self, i: int) -> str:
        return os.path.join(self.root, f"n{i + 1}.faketime")
