"""Where the chaos suite's proxies sit: one per Raft link direction, one per node's HTTP.

pysyncobj keeps one TCP connection per pair of nodes, opened by the node whose Raft
address sorts higher (``transport._shouldConnect``); both directions of Raft traffic
ride on it. Each node dials each peer through its own proxy ``raft_n<i>_to_n<j>``
(the peer's ``dial`` address in node i's config), while identities stay the real Raft
addresses. So:

* isolating node k is disabling every proxy with k at either end;
* cutting i -> j only is a ``timeout`` toxic on the one live connection, on the stream
  that carries i's bytes: ``upstream`` if i dialled, ``downstream`` if j did;
* every client -> node request goes through ``http_n<i>``, and peers advertise those
  addresses, so the 307s to the master go through the proxies too.
"""

from __future__ import annotations

import re

from toxiproxy import Toxiproxy

from testkit.process_cluster import free_ports

CUT = "one_way_cut"
RAFT_NAME = re.compile(r"raft_n(\d+)_to_n(\d+)")
HTTP_NAME = re.compile(r"http_n(\d+)")


class Topology:
    def __init__(self, client: Toxiproxy, raft: dict, http: dict) -> None:
        """``raft[i, j]``: the proxy node i dials node j through; ``http[i]``: node i's."""
        self.client, self.raft, self.http = client, raft, http
        n = 1 + max(i for i, _ in raft)
        # A peer's identity is its Raft address: the upstream of any proxy leading to it.
        self.raft_addrs = [next(p.upstream for (_, j), p in raft.items() if j == k) for k in range(n)]

    @classmethod
    def create(cls, client: Toxiproxy, http_ports: list[int], raft_ports: list[int], host: str = "127.0.0.1"):
        """Proxies for nodes on ``host`` with these ports (old ones of the same names go)."""
        n = len(http_ports)
        ports = iter(free_ports(n * n))

        def make(name: str, upstream: str):
            old = client.get_proxy(name)  # left over on a long-lived server
            if old is not None:
                client.destroy(old)
            return client.create(upstream=upstream, name=name, listen=f"{host}:{next(ports)}")

        http = {i: make(f"http_n{i + 1}", f"{host}:{http_ports[i]}") for i in range(n)}
        raft = {
            (i, j): make(f"raft_n{i + 1}_to_n{j + 1}", f"{host}:{raft_ports[j]}")
            for i in range(n)
            for j in range(n)
            if i != j
        }
        return cls(client, raft, http)

    @classmethod
    def attach(cls, client: Toxiproxy):
        """The proxies already on a server, found by name (as docker-compose.yml sets them up)."""
        raft, http = {}, {}
        for name, proxy in client.proxies().items():
            if m := RAFT_NAME.fullmatch(name):
                raft[int(m[1]) - 1, int(m[2]) - 1] = proxy
            elif m := HTTP_NAME.fullmatch(name):
                http[int(m[1]) - 1] = proxy
        if not raft:
            raise LookupError("no raft_n<i>_to_n<j> proxies on this toxiproxy server")
        return cls(client, raft, http)

    def add_node(self, http_port: int, raft_port: int, host: str = "127.0.0.1") -> int:
        """Proxies for one more node (a joiner): its HTTP, and each Raft link direction to
        and from every node known; its index. Which node dials a link is which Raft address
        sorts higher, so a joiner's links pass through these only while it dials them: its
        address must sort above every other's (its peers learn it from the membership and
        would dial it directly)."""
        k = len(self.raft_addrs)
        upstream = f"{host}:{raft_port}"
        if any(addr >= upstream for addr in self.raft_addrs):
            raise ValueError(f"a joiner's Raft address {upstream} must sort above {max(self.raft_addrs)}")
        ports = iter(free_ports(1 + 2 * k))
        self.http[k] = self.client.create(
            upstream=f"{host}:{http_port}", name=f"http_n{k + 1}", listen=f"{host}:{next(ports)}"
        )
        for j in range(k):
            for a, b, to in ((k, j, self.raft_addrs[j]), (j, k, upstream)):
                self.raft[a, b] = self.client.create(
                    upstream=to, name=f"raft_n{a + 1}_to_n{b + 1}", listen=f"{host}:{next(ports)}"
                )
        self.raft_addrs.append(upstream)
        return k

    def peer_fields(self, i: int, j: int) -> dict[str, str]:
        """What node i's config says of peer j: dial it, and send clients to it, via proxies."""
        return {"dial": self.raft[i, j].listen, "http": self.http[j].listen}

    def http_url(self, i: int) -> str:
        return f"http://{self.http[i].listen}"

    def dials(self, i: int, j: int) -> bool:
        """Does node i open the connection between i and j?"""
        return self.raft_addrs[i] > self.raft_addrs[j]

    def isolate(self, k: int) -> None:
        for (i, j), proxy in self.raft.items():
            if k in (i, j):
                proxy.disable()

    def cut(self, src: int, dst: int) -> None:
        """Drop everything src sends to dst; dst's bytes still reach src."""
        proxy, stream = (
            (self.raft[src, dst], "upstream") if self.dials(src, dst) else (self.raft[dst, src], "downstream")
        )
        proxy.add_toxic(name=CUT, type="timeout", stream=stream, attributes={"timeout": 0})

    def raft_latency(self, latency_ms: int, jitter_ms: int) -> None:
        for proxy in self.raft.values():
            for stream in ("upstream", "downstream"):
                proxy.add_toxic(
                    name=f"latency_{stream}",
                    type="latency",
                    stream=stream,
                    attributes={"latency": latency_ms, "jitter": jitter_ms},
                )

    def heal(self) -> None:
        """Every proxy enabled, every toxic gone (a removed ``timeout`` closes its links)."""
        self.client.reset()

    def destroy(self) -> None:
        for proxy in [*self.raft.values(), *self.http.values()]:
            self.client.destroy(proxy)
