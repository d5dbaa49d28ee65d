"""The test clusters' ports (testkit/process_cluster.py)."""

from __future__ import annotations

from testkit import process_cluster as pc


def test_a_port_below_is_found_when_every_port_below_went_to_earlier_tests(monkeypatch):
    """free_ports walks this process's share upwards from a random place; from near its
    start, the tests before took every port below a cluster's, and the membership test that
    needs its new node's address below a member's (``dialler`` "returning") failed with "no
    free port below". A port handed out before and free again, not the running cluster's,
    does."""
    start, size = pc._share()
    cluster = list(range(start + 40, start + 46))  # its http and raft ports, all handed out
    monkeypatch.setattr(pc, "_handed_out", set(range(start, start + 46)))
    port = pc.free_port_beside(cluster[-1], above=False, in_use=cluster)
    assert start <= port < cluster[0]
    assert port in pc._handed_out  # and not handed out again


def test_a_port_never_handed_out_comes_first(monkeypatch):
    start, _ = pc._share()
    monkeypatch.setattr(pc, "_handed_out", set(range(start, start + 30)))
    assert pc.free_port_beside(start + 35, above=False) in range(start + 30, start + 35)
