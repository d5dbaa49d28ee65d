"""``make compose-check``: the compose files are valid, and their node command lines and
files agree with the CLI and with each other. No Docker engine is needed.

Two layouts are checked: the default one (docker-compose.yml with the ports of
docker-compose.override.yml: a bridge network, the real toxiproxy) and the host-network
one (docker-compose.yml with deploy/compose/host/override.yml: every port on 127.0.0.1,
the toxiproxy stand-in built here). For each:

1. ``docker-compose --env-file .env.example config`` (Debian's docker-compose) parses it;
2. each node service's command, run by the real CLI with ``--check-config`` and the
   service's environment (its config file mapped back from the container), is accepted;
3. the wiring agrees: every peer is dialled through a toxiproxy proxy whose upstream is
   that peer's Raft address; the healthcheck asks ``/readyz`` on the HTTP port; clients
   are sent to where each node's HTTP port is reachable; the data folder is a named
   volume; on the host network, no service has a network of its own or published ports.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The compose files of each layout (none: compose's own choice, with the override file).
LAYOUTS = {
    "default": [],
    "host": ["docker-compose.yml", "deploy/compose/host/override.yml"],
}
STANDIN_DOCKERFILE = "deploy/toxiproxy-standin.Dockerfile"


def _port(addr: str) -> int:
    return int(addr.rpartition(":")[2])


def _volume(v) -> tuple[str, str]:
    """(source, target) of a volume entry, long form or "src:dst[:mode]"."""
    return (v["source"], v["target"]) if isinstance(v, dict) else tuple(v.split(":")[:2])


def _binds(service: dict) -> dict[str, str]:
    """Container path -> host path, for bind mounts."""
    out = {}
    for src, dst in map(_volume, service.get("volumes", [])):
        out[dst] = os.path.join(ROOT, src) if src.startswith(".") else src
    return out


def _check_proxy_service(tox: dict | None, host: bool) -> list[str]:
    if tox is None:
        return ["no toxiproxy service"]
    if host:
        if tox.get("build", {}).get("dockerfile") != STANDIN_DOCKERFILE:
            return [f"toxiproxy: on the host network it is the stand-in built from {STANDIN_DOCKERFILE}"]
    elif "shopify/toxiproxy" not in tox.get("image", ""):
        return ["no toxiproxy service with the real ghcr.io/shopify/toxiproxy image"]
    return []


def _check_host_network(services: dict) -> list[str]:
    problems = []
    for name, s in services.items():
        if s.get("network_mode") != "host":
            problems.append(f"{name}: not on the host network (network_mode: host)")
        if s.get("ports"):
            problems.append(f"{name}: publishes ports, which the host network cannot")
    return problems


def check_wiring(
    compose: dict, host: bool = False
) -> tuple[list[str], dict[str, tuple[list[str], dict, str]]]:
    """The cross-file checks; returns (problems, {service: (command, env, host config path)}).

    ``host``: the host-network layout, where peers dial 127.0.0.1 and nothing is published.
    """
    services = compose.get("services", {})
    nodes = {name: s for name, s in services.items() if "build" in s and name != "toxiproxy"}
    problems: list[str] = [] if len(nodes) == 3 else [f"expected 3 node services, found {sorted(nodes)}"]
    tox = services.get("toxiproxy")
    problems += _check_proxy_service(tox, host)
    problems += _check_host_network(services) if host else []
    proxies = {}
    if tox is not None:
        tox_json = _binds(tox).get("/config/toxiproxy.json")
        with open(tox_json) as f:
            proxies = {_port(p["listen"]): p for p in json.load(f)}
    dial_host = "127.0.0.1" if host else "toxiproxy"
    named = set(compose.get("volumes") or {})
    published = {}
    configs = {}
    runs = {}
    for name, s in nodes.items():
        cmd = s.get("command")
        if not isinstance(cmd, list) or "--config" not in cmd:
            problems.append(f"{name}: command must be a list with --config")
            continue
        path = _binds(s).get(cmd[cmd.index("--config") + 1])
        if path is None or not os.path.isfile(path):
            problems.append(f"{name}: the --config file is not bind-mounted from this repository")
            continue
        with open(path, "rb") as f:
            cfg = tomllib.load(f)
        configs[name] = cfg
        runs[name] = (cmd, {k: str(v) for k, v in (s.get("environment") or {}).items()}, path)
        http = _port(cfg["http"])
        test = " ".join(s.get("healthcheck", {}).get("test", []))
        if f"127.0.0.1:{http}/readyz" not in test:
            problems.append(f"{name}: healthcheck must ask /readyz on port {http}")
        for p in s.get("ports", []):
            spec = (
                p
                if isinstance(p, dict)
                else {"published": p.rsplit(":", 2)[-2], "target": p.rsplit(":", 1)[1]}
            )
            if int(spec["target"]) == http:
                published[name] = int(spec["published"])
        if host:
            published[name] = http  # clients reach it on its own port
        elif name not in published:
            problems.append(f"{name}: HTTP port {http} is not published")
        data_vols = [src for src, dst in map(_volume, s.get("volumes", [])) if dst == cfg["data_dir"]]
        if not data_vols or data_vols[0] not in named:
            problems.append(f"{name}: data_dir {cfg['data_dir']} is not on a named volume")
    for name, cfg in configs.items():
        for peer, p in cfg.get("peers", {}).items():
            other = configs.get(peer)
            if other is None:
                problems.append(f"{name}: peer {peer} is not a service")
                continue
            if p["raft"] != other["raft"]:
                problems.append(f"{name}: peer {peer} raft {p['raft']} but {peer} says {other['raft']}")
            proxy = proxies.get(_port(p.get("dial", ":0")))
            if not p.get("dial", "").startswith(f"{dial_host}:") or proxy is None:
                problems.append(f"{name}: peer {peer} is not dialled through a toxiproxy proxy")
            elif proxy["upstream"] != other["raft"] or proxy["name"] != f"raft_{name}_to_{peer}":
                problems.append(
                    f"{name}: proxy {proxy['name']} -> {proxy['upstream']} does not lead to {peer}"
                )
            if peer in published and _port(p["http"]) != published[peer]:
                problems.append(
                    f"{name}: sends clients to {p['http']} but {peer} is published on {published[peer]}"
                )
    return problems, runs


def check_commands(runs: dict) -> list[str]:
    """Run each node's command line through the real CLI with --check-config."""
    problems = []
    horologe = shutil.which("horologe") or os.path.join(os.path.dirname(sys.executable), "horologe")
    for name, (cmd, env, path) in runs.items():
        args = list(cmd)
        args[args.index("--config") + 1] = path
        res = subprocess.run(
            [horologe, *args, "--check-config"], env={**os.environ, **env}, capture_output=True, text=True
        )
        if res.returncode != 0:
            problems.append(f"{name}: `horologe {' '.join(cmd)}` is refused: {res.stderr.strip()}")
        else:
            print(res.stdout.rstrip())
    return problems


def load(layout: str) -> dict:
    """The layout's compose model as ``docker-compose config`` resolves it (secrets from .env.example)."""
    base = ["docker-compose", "--env-file", ".env.example"]
    for f in LAYOUTS[layout]:
        base += ["-f", f]
    res = subprocess.run([*base, "config"], cwd=ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        raise ValueError(f"docker-compose config ({layout} layout): {res.stderr.strip()}")
    return yaml.safe_load(res.stdout)


def main() -> int:
    problems = []
    for layout in LAYOUTS:
        try:
            compose = load(layout)
        except ValueError as e:
            problems.append(str(e))
            continue
        found, runs = check_wiring(compose, host=layout == "host")
        found += check_commands(runs)
        problems += [f"{layout} layout: {p}" for p in found]
        if not found:
            print(f"compose-check: {layout} layout is valid; {len(runs)} node command lines accepted")
    for p in problems:
        print(f"compose-check: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
