"""The compose check: the repository's docker-compose.yml passes; broken wiring does not."""

from __future__ import annotations

import copy
import importlib.util
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "compose_check", os.path.join(ROOT, "deploy", "compose_check.py")
)
compose_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compose_check)

SECRETS = {"HOROLOGE_CLIENT_TOKEN": "c", "HOROLOGE_ADMIN_TOKEN": "a", "HOROLOGE_CLUSTER_SECRET": "s"}


@pytest.fixture
def compose() -> dict:
    with open(os.path.join(ROOT, "docker-compose.yml")) as f:
        doc = yaml.safe_load(f)
    for s in doc["services"].values():  # what `docker-compose config` does with .env
        if "environment" in s:
            s["environment"] = dict(SECRETS)
    return doc


def test_the_repository_compose_file_is_wired_right(compose):
    problems, runs = compose_check.check_wiring(compose)
    assert problems == []
    assert sorted(runs) == ["n1", "n2", "n3"]
    assert compose_check.check_commands(runs) == []


def test_a_peer_dialled_around_toxiproxy_is_caught(compose, tmp_path):
    with open(os.path.join(ROOT, "deploy", "compose", "n1.toml")) as f:
        text = f.read().replace('dial = "toxiproxy:17012"', 'dial = "n2:7000"')
    (tmp_path / "n1.toml").write_text(text)
    n1 = compose["services"]["n1"]
    n1["volumes"] = [v.replace("./deploy/compose/n1.toml", str(tmp_path / "n1.toml")) for v in n1["volumes"]]
    problems, _ = compose_check.check_wiring(compose)
    assert problems == ["n1: peer n2 is not dialled through a toxiproxy proxy"]


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
