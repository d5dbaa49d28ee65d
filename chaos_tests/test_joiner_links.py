"""A node that joined a chaos cluster is reached through proxies like the first three, so a
fault that isolates it isolates it (the soak grows its cluster, then isolates masters)."""

from __future__ import annotations

import time

from testkit import process_cluster

from .harness import ChaosCluster


def test_a_joined_master_is_isolated_by_its_proxies(toxiproxy, tmp_path):
    c = ChaosCluster(str(tmp_path), toxiproxy)
    try:
        c.start_all()
        master = c.wait_connected()
        k = c.joiner([0, 1, 2])
        c.start(k)
        c.wait_serving(k)
        c.client(master, retry_s=10).add_member(
            f"n{k + 1}", f"127.0.0.1:{c.raft_ports[k]}", c.member_http(k), 60
        )
        deadline = time.monotonic() + 20
        while {p["node_id"] for p in c.status(k)["peers"] if p["connected"]} != {"n1", "n2", "n3"}:
            assert time.monotonic() < deadline, c.status(k)["peers"]
            time.sleep(0.1)
        c.client(master, retry_s=10).release_master(f"n{k + 1}")
        assert c.wait_leader() == k

        c.topology.isolate(k)
        c.wait_leader([0, 1, 2], exclude=k)  # cut off from every other node, it lost the cluster
        c.topology.heal()
        c.wait_connected()
    finally:
        c.stop_all()
        c.close()
        c.topology.destroy()


def test_a_joiner_sorts_above_the_nodes_whose_ports_ended_the_share(toxiproxy, tmp_path, monkeypatch):
    """A joiner's Raft address must sort above every other's (Topology.add_node). Ports are
    handed out upwards from a random place in the worker's share and wrap at its end: a
    cluster given the share's last ports once had a joiner given its first (CI: "a joiner's
    Raft address 127.0.0.1:28524 must sort above 127.0.0.1:32767")."""
    start, size = process_cluster._share()
    at_the_end = (start + (size - 8 + i) % size for i in range(size))
    monkeypatch.setattr(process_cluster, "_candidates", lambda: at_the_end)
    c = ChaosCluster(str(tmp_path), toxiproxy)  # configured, never started
    try:
        for _ in range(2):
            k = c.joiner([0, 1, 2])
            assert c.raft_ports[k] > max(c.raft_ports[:k]), c.raft_ports
    finally:
        c.close()
        c.topology.destroy()
