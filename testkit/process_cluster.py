"""A cluster of real node processes on 127.0.0.1, on free ports: for tests, benchmarks and chaos.

Fixed dev tokens (``ENV``); every node's log goes to ``<root>/n<i>.log``. Node i is read
through ``http`` (raw: the answer of that very node, no redirect followed, no retry) and
written to through ``client(i)`` (the SDK from node i: it follows the master and retries).
"""

from __future__ import annotations

import functools
import itertools
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator

from horologe import local_cluster as lc
from horologe.client import Client, HorologeError, RawClient, Reply
from horologe.client.calls import REFUSED_503
from horologe.client.errors import error_for
from horologe.storage import Storage

from .tls import Pki, make_pki

ENV = {
    "HOROLOGE_CLIENT_TOKEN": "client-token-for-tests",
    "HOROLOGE_ADMIN_TOKEN": "admin-token-for-tests",
    "HOROLOGE_CLUSTER_SECRET": "cluster-secret-for-tests",
}
CLIENT, ADMIN = ENV["HOROLOGE_CLIENT_TOKEN"], ENV["HOROLOGE_ADMIN_TOKEN"]


def free_ports(n: int) -> list[int]:
    """``n`` ports free on 127.0.0.1 now, none handed out before by this process.

    They are taken below the kernel's ephemeral range, so no outgoing connection takes
    one as its source port while its node is down (a node restarted on its port found it
    in use), and no connection to one whose node is not up yet connects to itself. Each
    pytest-xdist worker takes from a share of its own, so two workers never hand out the
    same port.
    """
    ports = list(itertools.islice(filter(_available, _candidates()), n))
    if len(ports) < n:
        raise RuntimeError("no free port left below the ephemeral range")
    _handed_out.update(ports)
    return ports


def free_port_beside(port: int, above: bool, in_use: Iterable[int] = ()) -> int:
    """A port free now above (or below) ``port``, of this process's share as
    :func:`free_ports` hands them out: one never handed out before by this process, or
    else one handed out before that is free again and not among ``in_use`` (the ports of
    the clusters still running, their stopped nodes included). :func:`free_ports` walks
    the share upwards from a random place, so when that place was near the share's start,
    every port below a cluster's may have gone to the tests before it."""
    start, size = _share()
    side = range(port + 1, start + size) if above else range(port - 1, start - 1, -1)
    taken = {port, *in_use}
    for fits in (_available, lambda p: p not in taken and _free(p)):
        for candidate in side:
            if fits(candidate):
                _handed_out.add(candidate)
                return candidate
    raise RuntimeError(f"no free port {'above' if above else 'below'} {port} in [{start}, {start + size})")


def lowest_free_ports(n: int) -> list[int]:
    """``n`` ports free now, the lowest of this process's share as :func:`free_port_beside`
    hands them out, in order: for a cluster whose later nodes need ports above all of its
    own (chaos_tests/topology.py), which :func:`free_ports` cannot promise, since it wraps
    at the share's end."""
    ports = [_share()[0] - 1]
    for _ in range(n):
        ports.append(free_port_beside(ports[-1], above=True))
    return ports[1:]


def free_port_run(n: int) -> int:
    """The first of ``n`` consecutive ports, as :func:`free_ports` would hand them out."""
    run: list[int] = []
    for port in _candidates():
        if run and port != run[-1] + 1:
            run = []  # the share wrapped around
        run = [*run, port] if _available(port) else []
        if len(run) == n:
            _handed_out.update(run)
            return run[0]
    raise RuntimeError(f"no {n} consecutive free ports left below the ephemeral range")


_handed_out: set[int] = set()  # every port handed out by this process


def _available(port: int) -> bool:
    """Not handed out before, and free now."""
    return port not in _handed_out and _free(port)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False  # in use, or held by connections still in TIME_WAIT
    return True


@functools.cache
def _candidates() -> Iterator[int]:
    """This process's ports to try, one iterator for its life: its worker's share of
    [PORTS_FROM, the ephemeral range's start), from a random place, each port once."""
    start, size = _share()
    first = random.randrange(size)
    return (start + (first + i) % size for i in range(size))


@functools.cache
def _share() -> tuple[int, int]:
    """This process's share of [PORTS_FROM, the ephemeral range's start): first port, count."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral = int(f.read().split()[0])
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    # A worker xdist starts in place of one that died may be numbered past the count.
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")) % workers
    size = (ephemeral - PORTS_FROM) // workers
    if size < 100:
        raise RuntimeError(
            f"the ephemeral ports start at {ephemeral} (net.ipv4.ip_local_port_range): too few ports "
            f"from {PORTS_FROM} below them for {workers} worker(s)"
        )
    return PORTS_FROM + worker * size, size


PORTS_FROM = 20_000  # above the fixed ports of make run (7081, 8081) and the compose test (17xxx, 18xxx)


class Cluster:
    def __init__(
        self,
        root: str,
        nodes: int = 3,
        extra_toml: str = "",
        env: dict[int, dict] | None = None,
        ports: tuple[list[int], list[int]] | None = None,
        peer_fields: lc.PeerFields | None = None,
        data_root: str | None = None,
        tls: bool = False,
    ):
        """``ports`` is (http, raft), free ones by default; ``env[i]`` is added to node i's.

        Configs and logs go to ``root``, node data to ``data_root`` (default: ``root``).
        With ``tls``, a CA and a certificate per node are made in ``<root>/tls`` (``pki``);
        every node serves HTTPS and trusts that CA for its calls to peers, and the
        clients here trust it too.
        """
        self.root = root
        self.data_root = data_root or root
        if ports is None:
            free = free_ports(2 * nodes)
            ports = free[:nodes], free[nodes:]
        self.http_ports, self.raft_ports = ports
        self.pki: Pki | None = (
            make_pki(os.path.abspath(os.path.join(root, "tls")), [f"n{i + 1}" for i in range(nodes)])
            if tls
            else None
        )
        self.configs = lc.write_configs(
            root, self.http_ports, self.raft_ports, extra_toml, peer_fields, self.data_root, self._tls_toml
        )
        self._extra_toml = extra_toml
        self._peer_fields = peer_fields
        self.env = env or {}
        self.procs: dict[int, subprocess.Popen] = {}
        self.http = RawClient(timeout=5.0, ca=self.ca)
        self._clients: dict[tuple, Client] = {}

    @property
    def ca(self) -> str | None:
        """The CA file the nodes' certificates chain to (None without TLS)."""
        return self.pki.ca if self.pki else None

    @property
    def scheme(self) -> str:
        return "https" if self.pki else "http"

    def _tls_toml(self, i: int) -> str:
        if self.pki is None:
            return ""
        cert, key = self.pki.certs[f"n{i + 1}"]
        return f'tls_cert = "{cert}"\ntls_key = "{key}"\ntls_ca = "{self.pki.ca}"'

    def url(self, i: int) -> str:
        return f"{self.scheme}://127.0.0.1:{self.http_ports[i]}"

    def client(self, i: int, *, retry_s: float = 10.0, timeout: float = 10.0) -> Client:
        """An SDK client entering at node i (both tokens), one per settings, kept for reuse.

        Writes go on to the master from there; once it has named the master, the client
        goes there first. Reads that must come from node i itself go through ``http``.
        """
        key = (i, retry_s, timeout)
        if key not in self._clients:
            self._clients[key] = Client(
                [self.url(i)], CLIENT, admin_token=ADMIN, retry_s=retry_s, timeout=timeout, ca=self.ca
            )
        return self._clients[key]

    def close(self) -> None:
        """Close the HTTP clients (the nodes are stopped by ``stop_all``)."""
        for c in self._clients.values():
            c.close()
        self.http.close()

    @property
    def indexes(self) -> list[int]:
        return list(range(len(self.configs)))

    def joiner(self, peers: list[int], raft_port: int | None = None) -> int:
        """Write the config of one more node, ``n<k>``, started to join a running cluster
        (``join = true``) with the nodes ``peers`` as its peers, at ``raft_port`` if given;
        its index (``start`` it, then add it: ``horologe cluster add``). Not with TLS (no
        certificate is made for it)."""
        if self.pki is not None:
            raise ValueError("a joining node gets no certificate here")
        (http,) = free_ports(1)
        raft = raft_port or free_ports(1)[0]
        i = len(self.configs)
        self.http_ports.append(http)
        self.raft_ports.append(raft)
        self._joiner_ports(i)
        lines = [
            f'node_id = "n{i + 1}"',
            f'data_dir = "{os.path.abspath(os.path.join(self.data_root, f"n{i + 1}"))}"',
            f'http = "127.0.0.1:{http}"',
            f'raft = "127.0.0.1:{raft}"',
            f'raft_bind = "127.0.0.1:{raft}"',
            "join = true",
            self._extra_toml,
        ]
        for j in peers:
            fields = {"http": f"127.0.0.1:{self.http_ports[j]}", "raft": f"127.0.0.1:{self.raft_ports[j]}"}
            fields.update(self._peer_fields(i, j) if self._peer_fields else {})
            lines.append(f"[peers.n{j + 1}]")
            lines += [f'{k} = "{v}"' for k, v in fields.items()]
        path = os.path.join(self.root, f"n{i + 1}.toml")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.configs.append(path)
        return i

    def _joiner_ports(self, i: int) -> None:
        """Node ``i``'s ports were just given (a joiner): a subclass sets up what leads to them."""

    def member_http(self, i: int) -> str:
        """The HTTP address node ``i`` is known by in the membership (clients are sent there)."""
        return f"127.0.0.1:{self.http_ports[i]}"

    def start(self, i: int) -> None:
        self.procs[i] = lc.start_node(self.configs[i], {**ENV, **self.env.get(i, {})}, self.root)

    def start_all(self) -> None:
        for i in self.indexes:
            self.start(i)
        self.wait_connected()

    def wait_serving(self, i: int, timeout_s: float = 20.0) -> None:
        """Until node i answers its API (ready or not: ``/admin/status`` answers either way)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.status(i)
                return
            except HorologeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def wait_connected(self, timeout_s: float = 20.0) -> int:
        """Until a master is agreed and every live node is ready and linked to every other; returns it."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            master = self.wait_leader(timeout_s=deadline - time.monotonic())
            alive = self.alive()
            if all(self.ready(i, among=alive) for i in alive):
                return master
            time.sleep(0.1)
        raise TimeoutError("nodes never all linked")

    def ready(self, i: int, among: list[int]) -> bool:
        """Node i answers /readyz 200 and has a link to every node of ``among``."""
        try:
            body = self.http.get(f"{self.url(i)}/readyz", timeout=2.0).result()
        except HorologeError:
            return False
        return all(up for peer, up in body["links"].items() if int(peer[1:]) - 1 in among)

    def alive(self) -> list[int]:
        return [i for i, p in self.procs.items() if p.poll() is None]

    def status(self, i: int) -> dict:
        return self.http.get(f"{self.url(i)}/admin/status", token=ADMIN, timeout=2.0).result()

    def wait_leader(
        self, among: list[int] | None = None, timeout_s: float = 20.0, exclude: int | None = None
    ) -> int:
        """Index of the master once every live node (or ``among``) agrees on one (not ``exclude``)."""
        deadline = time.monotonic() + timeout_s
        last: object = "no status read"
        while time.monotonic() < deadline:
            try:
                named = {i: self.status(i)["leader"] for i in (among or self.alive())}
                last = ", ".join(f"n{i + 1}: {leader}" for i, leader in named.items())
                seen = set(named.values())
                if len(seen) == 1 and None not in seen:
                    leader = int(seen.pop()[1:]) - 1
                    if leader != exclude:
                        return leader
            except HorologeError as e:
                last = e
            time.sleep(0.1)
        raise TimeoutError(f"no agreed master in {timeout_s:g} s (last seen: {last})")

    def catch_up(
        self, i: int, timeout_s: float = 30.0, behind: int = 2, among: list[int] | None = None
    ) -> None:
        """Until node i has applied all but ``behind`` entries of what the master has (the
        master every live node, or ``among``, agrees on)."""
        deadline = time.monotonic() + timeout_s
        last: object = "no status read"
        while time.monotonic() < deadline:
            try:
                leader = self.wait_leader(among, timeout_s=max(0.1, deadline - time.monotonic()))
                m = self.status(leader)["applied_index"]
                mine = self.status(i)["applied_index"]
                if mine >= m - behind:
                    return
                last = f"applied {mine}, master n{leader + 1} {m}"
            except (HorologeError, TimeoutError) as e:  # a node still starting, or an election
                last = e
            time.sleep(0.2)
        raise TimeoutError(f"n{i + 1} did not catch up in {timeout_s:g} s (last seen: {last})")

    def make_master(self, i: int, tries: int = 5) -> None:
        """Hand the master's place to node i (``release-master`` to it), until it holds it."""
        for _ in range(tries):
            master = self.wait_connected()
            if master == i:
                return
            self.client(master).release_master(f"n{i + 1}")
        assert self.wait_connected() == i

    def to_master(self, method: str, path: str, body=None, **options) -> Reply:
        """One raw call (``self.http.request``'s arguments, a path for the URL) to the master,
        its answer returned as sent: for calls whose answer a test judges itself (refusals,
        reads), which the SDK would take apart or retry.

        Sent again only while the answer says nothing was done, by the SDK's rule: a 3xx (the
        node asked is not, or no longer, the master: an election a loaded machine can start
        at any time) or a 503 of ``REFUSED_503`` (``no_master`` among them).
        """
        deadline = time.monotonic() + 20.0
        while True:
            url = f"{self.url(self.wait_leader(timeout_s=max(0.1, deadline - time.monotonic())))}{path}"
            r = self.http.request(method, url, body, **options)
            refused = r.status == 503 and error_for(r.status, r.body).code in REFUSED_503
            if not (300 <= r.status < 400 or refused) or time.monotonic() > deadline:
                return r
            time.sleep(0.1)

    def signal(self, i: int, sig: int) -> None:
        os.kill(self.procs[i].pid, sig)
        if sig == signal.SIGKILL:
            self.procs[i].wait()

    def stop(self, i: int) -> None:
        p = self.procs[i]
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            self._wait_stopped(i)

    def _wait_stopped(self, i: int) -> None:
        p = self.procs[i]
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def stop_all(self) -> None:
        """SIGTERM every node (a stopped one first gets SIGCONT), then wait: the others at
        once, then the master. A master stopped with its followers would spend up to 4 s
        trying to hand over to nodes that are going away (node/main.py); once they are
        gone it has nobody to hand over to and stops at once."""
        last = [i for i in self.alive() if self._says_master(i)][:1]
        for group in ([i for i in self.procs if i not in last], last):
            for i in group:
                if self.procs[i].poll() is None:
                    self.procs[i].send_signal(signal.SIGCONT)
                    self.procs[i].send_signal(signal.SIGTERM)
            for i in group:
                self._wait_stopped(i)

    def _says_master(self, i: int) -> bool:
        try:
            body = self.http.get(f"{self.url(i)}/admin/status", token=ADMIN, timeout=0.5).result()
        except HorologeError:
            return False  # not answering (paused, starting): stopped with the others
        return body["role"] == "master"

    def produce(self, i: int, messages: list[dict]) -> list[dict]:
        """Post a batch through node i; the results, one per message."""
        return self.client(i).request("POST", "/v1/messages/batch", {"messages": messages}).body["results"]

    def store(self, i: int) -> Storage:
        """Open node i's store read-only, as the node left it (stop the node first).

        Read-only folds every batch the node applied: a writable open would go back to the
        last sync point, whose later batches only the node's own restart replays from Raft.
        """
        return Storage(os.path.join(self.data_root, f"n{i + 1}", "store"), read_only=True)

    def log(self, i: int) -> str:
        with open(os.path.join(self.root, f"n{i + 1}.log")) as f:
            return f.read()
