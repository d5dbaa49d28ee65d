"""The compose check: both layouts of the repository pass; broken wiring does not."""

from __future__ import annotations

import copy
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "compose_check", os.path.join(ROOT, "deploy", "compose_check.py")
)
compose_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compose_check)


@pytest.fixture
def compose() -> dict:
    """The default layout, resolved by Debian's docker-compose (make deb-tools installs it)."""
    return compose_check.load("default")


@pytest.fixture
def host_compose() -> dict:
    return compose_check.load("host")


def _swap_node_config(compose: dict, tmp_path, node: str, old: str, new: str, folder: str = "") -> None:
    src = os.path.join(ROOT, "deploy", "compose", folder, f"{node}.toml")
    with open(src) as f:
        text = f.read()
    assert old in text
    (tmp_path / f"{node}.toml").write_text(text.replace(old, new))
    s = compose["services"][node]
    s["volumes"] = [v.replace(src, str(tmp_path / f"{node}.toml")) for v in s["volumes"]]


def test_the_repository_compose_file_is_wired_right(compose):
    problems, runs = compose_check.check_wiring(compose)
    assert problems == []
    assert sorted(runs) == ["n1", "n2", "n3"]
    assert compose_check.check_commands(runs) == []


def test_the_host_network_override_is_wired_right(host_compose):
    problems, runs = compose_check.check_wiring(host_compose, host=True)
    assert problems == []
    assert sorted(runs) == ["n1", "n2", "n3"]
    assert compose_check.check_commands(runs) == []


def test_a_peer_dialled_around_toxiproxy_is_caught(compose, tmp_path):
    _swap_node_config(compose, tmp_path, "n1", 'dial = "toxiproxy:17012"', 'dial = "n2:7000"')
    problems, _ = compose_check.check_wiring(compose)
    assert problems == ["n1: peer n2 is not dialled through a toxiproxy proxy"]


def test_host_layout_faults_are_caught(host_compose, tmp_path):
    bad = copy.deepcopy(host_compose)
    _swap_node_config(bad, tmp_path, "n2", 'dial = "127.0.0.1:17123"', 'dial = "127.0.0.1:17083"', "host")
    del bad["services"]["n3"]["network_mode"]
    bad["services"]["toxiproxy"]["build"]["dockerfile"] = "Dockerfile"
    problems, _ = compose_check.check_wiring(bad, host=True)
    assert sorted(problems) == [
        "n2: peer n3 is not dialled through a toxiproxy proxy",
        "n3: not on the host network (network_mode: host)",
        "toxiproxy: on the host network it is the stand-in built from deploy/toxiproxy-standin.Dockerfile",
    ]


def test_wrong_healthcheck_port_and_unnamed_volume_are_caught(compose):
    bad = copy.deepcopy(compose)
    bad["services"]["n2"]["healthcheck"]["test"][-1] = "urlopen('http://127.0.0.1:9999/readyz')"
    bad["volumes"].pop("n3-data")
    problems, _ = compose_check.check_wiring(bad)
    assert "n2: healthcheck must ask /readyz on port 8080" in problems
    assert "n3: data_dir /var/lib/horologe is not on a named volume" in problems


def test_a_command_line_the_cli_refuses_is_caught(compose):
    _, runs = compose_check.check_wiring(compose)
    cmd, env, path = runs["n1"]
    problems = compose_check.check_commands({"n1": ([*cmd, "--no-such-flag"], env, path)})
    assert len(problems) == 1 and "no-such-flag" in problems[0]
    problems = compose_check.check_commands({"n1": (cmd, {}, path)})  # no secrets
    assert len(problems) == 1 and "client_token is not set" in problems[0]
