"""This repository's docker-compose deployment in its host-network layout, run by Debian's
docker-compose on a private engine (``testkit.dockerd``): build the images offline, bring
the services up, wait for health, signal, stop and start them, read their logs.

The layout's addresses are fixed, and read here from its files (deploy/compose/host/).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import tomllib

import yaml

from horologe import local_cluster as lc

from .dockerd import Dockerd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = os.path.join(ROOT, "deploy", "compose", "host")
FILES = ("docker-compose.yml", "deploy/compose/host/override.yml")
NODES = ("n1", "n2", "n3")


def _node_config(node: str) -> dict:
    with open(os.path.join(HOST, f"{node}.toml"), "rb") as f:
        return tomllib.load(f)


def _proxy_api_port() -> int:
    with open(os.path.join(HOST, "override.yml")) as f:
        command = yaml.safe_load(f)["services"]["toxiproxy"]["command"]
    return int(command[command.index("--port") + 1])


def _proxy_ports() -> list[int]:
    with open(os.path.join(HOST, "toxiproxy.json")) as f:
        return [int(p["listen"].rpartition(":")[2]) for p in json.load(f)]


URLS = {n: f"http://{_node_config(n)['http']}" for n in NODES}
TOXIPROXY_URL = f"http://127.0.0.1:{_proxy_api_port()}"
PORTS = [
    *(int(_node_config(n)[k].rpartition(":")[2]) for n in NODES for k in ("http", "raft")),
    _proxy_api_port(),
    *_proxy_ports(),
]


def base_image(engine: Dockerd) -> str:
    """The image deploy/base-image.sh chooses or makes for the Dockerfiles' BASE."""
    res = subprocess.run(
        [os.path.join(ROOT, "deploy", "base-image.sh")],
        env=engine.env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if res.returncode != 0:
        raise RuntimeError(f"deploy/base-image.sh failed (exit {res.returncode}):\n{res.stderr}")
    return res.stdout.strip().splitlines()[-1]


def taken_ports() -> list[int]:
    """The layout's ports that something on this machine already listens on."""
    return lc.taken_ports(PORTS)


class ComposeProject:
    def __init__(self, engine: Dockerd, name: str, env: dict[str, str]) -> None:
        """``env`` goes to the project's env file (secrets, HOROLOGE_BASE), in the engine's folder."""
        self.engine, self.name = engine, name
        self.env_file = os.path.join(engine.root, f"{name}.env")
        with open(self.env_file, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in env.items())

    def run(self, *args: str, timeout: float = 600.0) -> str:
        """``docker-compose <args>`` on this project; its stdout, or RuntimeError with its output."""
        files = [a for f in FILES for a in ("-f", f)]
        cmd = ["docker-compose", "-p", self.name, "--env-file", self.env_file, *files, *args]
        res = subprocess.run(
            cmd, cwd=ROOT, env=self.engine.env, capture_output=True, text=True, timeout=timeout
        )
        if res.returncode != 0:
            raise RuntimeError(
                f"docker-compose {' '.join(args)}: exit {res.returncode}\n{res.stdout}{res.stderr}"
            )
        return res.stdout

    def _inspect(self, service: str, fmt: str) -> str:
        cid = self.run("ps", "-q", service).strip()
        return self.engine.docker("inspect", "-f", fmt, cid).strip() if cid else "absent"

    def status(self, service: str) -> str:
        """Its container's state: running, exited, ... (absent: no container)."""
        return self._inspect(service, "{{.State.Status}}")

    def health(self, service: str) -> str:
        """Its healthcheck's verdict: starting, healthy, unhealthy."""
        return self._inspect(service, "{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}")

    def wait_healthy(self, services=NODES, timeout_s: float = 120.0) -> float:
        """Until every one of ``services`` is healthy; returns the seconds it took."""
        t0 = time.monotonic()
        while True:
            states = {s: self.health(s) for s in services}
            if all(st == "healthy" for st in states.values()):
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout_s:
                raise TimeoutError(f"not healthy within {timeout_s:g} s: {states}")
            time.sleep(0.5)

    def logs(self, service: str) -> str:
        return self.run("logs", "--no-color", service)

    def networks(self) -> set[str]:
        return set(self.engine.docker("network", "ls", "--format", "{{.Name}}").split())

    def volumes(self) -> set[str]:
        return set(self.engine.docker("volume", "ls", "--format", "{{.Name}}").split())
