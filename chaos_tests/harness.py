"""Three real node processes behind toxiproxy, with per-node clock skew through libfaketime."""

from __future__ import annotations

import glob

from horologe.node.process_cluster import Cluster, free_ports

from .topology import Topology
from .toxiproxy_server import ToxiproxyServer

FAKETIME_LIBS = "/usr/lib/*/faketime/libfaketimeMT.so.1"  # Debian's `faketime` package
FAKETIME_KEYS = ("LD_PRELOAD", "FAKETIME")  # what faketime_env sets


def faketime_env(offset_s: int) -> dict[str, str]:
    """Environment that starts a process with its clocks ``offset_s`` seconds off.

    Monotonic clocks are shifted too: with ``FAKETIME_DONT_FAKE_MONOTONIC=1``, libfaketime
    0.9.10 makes Python's ``time.sleep`` fail with EINVAL. A constant shift of a
    monotonic clock changes no timeout, so only the wall clock is skewed in effect.
    """
    libs = glob.glob(FAKETIME_LIBS)
    if not libs:
        raise RuntimeError("libfaketime is missing: apt-get install faketime (make test does)")
    return {"LD_PRELOAD": libs[0], "FAKETIME": f"{offset_s:+d}s"}


class ChaosCluster(Cluster):
    """A :class:`Cluster` whose Raft and client links all pass through toxiproxy."""

    def __init__(self, root: str, toxiproxy: ToxiproxyServer, nodes: int = 3, extra_toml: str = "") -> None:
        ports = free_ports(2 * nodes)
        http, raft = ports[:nodes], ports[nodes:]
        self.topology = Topology.create(toxiproxy.client, http, raft)
        super().__init__(root, nodes, extra_toml, ports=(http, raft), peer_fields=self.topology.peer_fields)

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
