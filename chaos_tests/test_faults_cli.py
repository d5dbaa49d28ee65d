"""`python -m chaos_tests.faults` on proxies laid out as docker-compose.yml lays them out."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from testkit.process_cluster import free_ports

from .faults import main

COMPOSE_PROXIES = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "deploy", "compose", "toxiproxy.json"
)


@pytest.fixture
def compose_like(server, toxiproxy):
    """The compose file's proxies (names and upstreams), listening on free local ports."""
    server.reset()
    with open(COMPOSE_PROXIES) as f:
        proxies = json.load(f)
    ports = free_ports(len(proxies))
    made = [
        server.create(upstream=p["upstream"], name=p["name"], listen=f"127.0.0.1:{port}")
        for p, port in zip(proxies, ports, strict=True)
    ]
    yield CliRunner(env={"TOXIPROXY_URL": toxiproxy.url})
    for p in made:
        server.destroy(p)


def run(runner, *args) -> str:
    res = runner.invoke(main, list(args))
    assert res.exit_code == 0, res.output
    return res.output


def test_isolate_disables_every_link_of_that_node(server, compose_like):
    run(compose_like, "isolate", "n2")
    down = {n for n, p in server.proxies().items() if not p.enabled}
    assert down == {"raft_n1_to_n2", "raft_n2_to_n1", "raft_n2_to_n3", "raft_n3_to_n2"}
    run(compose_like, "heal")
    assert all(p.enabled for p in server.proxies().values())


def test_cut_takes_the_stream_that_carries_the_senders_bytes(server, compose_like):
    # "n3:7000" > "n1:7000": n3 dials n1, so n1's bytes to n3 go downstream on raft_n3_to_n1.
    run(compose_like, "cut", "n1", "n3")
    toxics = {n: p.toxics() for n, p in server.proxies().items() if p.toxics()}
    assert list(toxics) == ["raft_n3_to_n1"]
    assert toxics["raft_n3_to_n1"]["one_way_cut"].stream == "downstream"
    run(compose_like, "cut", "n3", "n2")  # n3 dials n2: its bytes go upstream
    assert server.get_proxy("raft_n3_to_n2").toxics()["one_way_cut"].stream == "upstream"
    assert "one_way_cut" in run(compose_like, "show")


def test_latency_on_every_raft_link_and_bad_names(server, compose_like):
    run(compose_like, "latency", "--ms", "20", "--jitter", "5")
    for p in server.proxies().values():
        assert set(p.toxics()) == {"latency_upstream", "latency_downstream"}
    res = compose_like.invoke(main, ["isolate", "2"])
    assert res.exit_code == 2 and "a node is n1, n2" in res.output
