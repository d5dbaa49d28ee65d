"""``horologe local-cluster``: N node processes on 127.0.0.1, for trying Horologe out."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

from horologe.client import Client, HorologeError, RawClient
from horologe.node.data_lock import lock_holder

TOKEN_ENV = ("HOROLOGE_CLIENT_TOKEN", "HOROLOGE_ADMIN_TOKEN", "HOROLOGE_CLUSTER_SECRET")


PeerFields = Callable[[int, int], dict[str, str]]


def write_configs(
    data: str,
    http_ports: list[int],
    raft_ports: list[int],
    extra: str = "",
    peer_fields: PeerFields | None = None,
    data_root: str | None = None,
    node_extra: Callable[[int], str] | None = None,
) -> list[str]:
    """One TOML file per node (n1, n2, ...) in ``data``; ``extra`` is added to each, and
    ``node_extra(i)`` (0-based) to node i's alone (its own TLS certificate, say).

    Node i keeps its data in ``<data_root>/n<i>`` (``data_root`` defaults to ``data``).

    ``peer_fields(i, j)`` (0-based) overrides fields of peer j in node i's file: its
    ``dial`` address (a proxy), or the ``http`` address clients are sent to.
    """
    paths = []
    nodes = len(http_ports)
    for i in range(1, nodes + 1):
        lines = [
            f'node_id = "n{i}"',
            f'data_dir = "{os.path.abspath(os.path.join(data_root or data, f"n{i}"))}"',
            f'http = "127.0.0.1:{http_ports[i - 1]}"',
            f'raft = "127.0.0.1:{raft_ports[i - 1]}"',
            f'raft_bind = "127.0.0.1:{raft_ports[i - 1]}"',  # on this machine only, as HTTP
            extra,
            node_extra(i - 1) if node_extra else "",
        ]
        for j in range(1, nodes + 1):
            if j != i:
                fields = {"http": f"127.0.0.1:{http_ports[j - 1]}", "raft": f"127.0.0.1:{raft_ports[j - 1]}"}
                fields.update(peer_fields(i - 1, j - 1) if peer_fields else {})
                lines.append(f"[peers.n{j}]")
                lines += [f'{k} = "{v}"' for k, v in fields.items()]
        path = os.path.join(data, f"n{i}.toml")
        os.makedirs(data, exist_ok=True)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def running_nodes(data: str, nodes: int) -> list[str]:
    """Those of nodes n1..n<nodes> whose data folder under ``data`` a running node process
    holds, as ``n<i> (pid P)``."""
    out = []
    for i in range(1, nodes + 1):
        pid = lock_holder(os.path.join(data, f"n{i}"))
        if pid is not None:
            out.append(f"n{i} (pid {pid})")
    return out


class NodeExited(RuntimeError):
    """A node process ended before the cluster was ready."""


def taken_ports(ports: list[int]) -> list[int]:
    """Those of ``ports`` that something on 127.0.0.1 already listens on (another
    local-cluster, say). Bound as the node binds them, with SO_REUSEADDR, so the TIME_WAIT
    connections a cluster stopped a moment ago leaves do not count."""
    taken = []
    for port in ports:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                taken.append(port)
    return taken


def secrets_env() -> tuple[dict[str, str], bool]:
    """The three secrets from the environment, generating any that are unset."""
    env = {}
    generated = False
    for name in TOKEN_ENV:
        env[name] = os.environ.get(name) or secrets.token_urlsafe(18)
        generated |= name not in os.environ
    return env, generated


def start_node(config: str, env: dict[str, str], log_dir: str) -> subprocess.Popen:
    name = os.path.basename(config)[:-5]
    with open(os.path.join(log_dir, f"{name}.log"), "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "horologe", "node", "--config", config],
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_ready(
    urls: list[str], timeout_s: float = 30.0, procs: list[subprocess.Popen] | None = None, log_dir: str = ""
) -> str:
    """Wait until every node is ready, agrees on a leader and is linked to every other; return the leader.

    Links matter: a node that cannot hear a master it may be handed to would campaign
    and take the wheel back (docs/cluster.md, "Links and releases").

    ``procs`` (node i's process, logging to ``log_dir``/n<i>.log): one that exits meanwhile
    ends the wait at once, with :class:`NodeExited` naming it and its log's last lines.
    """
    deadline = time.monotonic() + timeout_s
    missing: list[str] = ["no node answered"]
    with RawClient(timeout=10.0) as http:  # a 503 is an answer here: its body says what is missing
        while time.monotonic() < deadline:
            for i, p in enumerate(procs or (), 1):
                if p.poll() is not None:
                    log = os.path.join(log_dir, f"n{i}.log")
                    raise NodeExited(
                        f"n{i} exited with code {p.returncode} before the cluster was ready; "
                        f"the end of {log}:\n{_tail(log)}"
                    )
            states = []
            for u in urls:
                try:
                    body = http.get(f"{u}/readyz").body
                except HorologeError:
                    body = None
                states.append(body if isinstance(body, dict) and "links" in body else None)
            if None in states:
                time.sleep(0.2)
                continue
            leaders = {st["leader"] for st in states}
            missing = []
            for i, st in enumerate(states):
                missing += [f"n{i + 1} -> {peer}" for peer, up in st["links"].items() if not up]
                missing += [] if st["clock"] else [f"n{i + 1}'s clock quorum"]
            if len(leaders) == 1 and None not in leaders and not missing:
                return leaders.pop()
            missing = missing or [f"one master (seen: {sorted(map(str, leaders))})"]
            time.sleep(0.1)
    raise TimeoutError(f"cluster not ready after {timeout_s:.0f} s; waiting for {', '.join(missing)}")


def _tail(path: str, lines: int = 10) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 16_384))
            return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"(unreadable: {e})"


def stop(procs: list[subprocess.Popen], timeout_s: float = 10.0) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def demo(url: str, token: str, echo, first_shown: Callable[[], None] | None = None) -> None:
    """Schedule five messages at +2 .. +10 s and show them turn delivered, with lateness;
    ``first_shown()`` runs once the first delivery is shown."""
    now = int(time.time() * 1000)
    with Client([url], token) as client:
        pending = []
        for k in range(1, 6):
            s = client.produce("demo", f"hello #{k}", deliver_at=now + 2000 * k)
            pending.append(s.id)
            echo(f"scheduled {s.id} for +{2 * k:>2} s")
        while pending:
            time.sleep(0.1)
            for mid in list(pending):
                st = client.status(mid)
                if st.state == "delivered":
                    late = st.delivered_at - st.deliver_at
                    echo(
                        f"delivered {mid}  deliver_at={st.deliver_at}  delivered_at={st.delivered_at}"
                        f"  lateness={late} ms"
                    )
                    pending.remove(mid)
                    if first_shown is not None:
                        first_shown()
                        first_shown = None
