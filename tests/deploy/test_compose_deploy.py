"""The docker-compose deployment, run for real: a private dockerd, the images built with no
registry (deploy/base-image.sh), three node containers and the toxiproxy stand-in on the
host network (deploy/compose/host/override.yml), then what a user would try on it:

1. start dockerd and build the images;  2. ``up``, three healthy nodes, messages delivered;
3. SIGKILL of the master's container: a new master delivers everything;
4. ``stop`` of the new master: it hands over first and logs ``gap_ms``;
5. ``down`` and ``up``: every scheduled message is still there (named volumes);
6. the master isolated through the proxy service (``chaos_tests.faults``), then healed.

Each step prints what it took (``make compose-test`` shows it; docs/deploy.md keeps a run).
Where dockerd cannot start, the test fails with the reason: it never skips.
"""

from __future__ import annotations

import ast
import re
import secrets
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from horologe.client import Client, HorologeError, RawClient
from horologe.local_cluster import TOKEN_ENV, wait_ready
from testkit.compose import NODES, ROOT, TOXIPROXY_URL, URLS, ComposeProject, base_image, taken_ports
from testkit.dockerd import start_dockerd
from testkit.waiting import wait_until

PROJECT = "horologe-compose-test"
GROUP = "compose-test"
SECRETS = {name: secrets.token_urlsafe(18) for name in TOKEN_ENV}
CLIENT, ADMIN = SECRETS["HOROLOGE_CLIENT_TOKEN"], SECRETS["HOROLOGE_ADMIN_TOKEN"]
TIMINGS: dict[str, float] = {}


@contextmanager
def step(name: str):
    print(f"\ncompose-test: {name} ...", flush=True)
    t0 = time.monotonic()
    yield
    TIMINGS[name] = time.monotonic() - t0
    print(f"compose-test: {name}: {TIMINGS[name]:.1f} s", flush=True)


def note(text: str) -> None:
    print(f"compose-test:   {text}", flush=True)


@pytest.fixture(scope="module")
def engine():
    with step("start dockerd"):
        engine = start_dockerd()  # raises with the reason: no quiet skip
    yield engine
    with step("stop dockerd, remove its data root"):
        engine.stop()


@pytest.fixture(scope="module")
def project(engine):
    taken = taken_ports()
    assert not taken, f"ports of the host layout already in use: {taken} (another compose test running?)"
    with step("base image"):
        base = base_image(engine)
    note(f"base image {base}")
    project = ComposeProject(engine, PROJECT, {**SECRETS, "HOROLOGE_BASE": base})
    with step("build the node and proxy images"):
        project.run("build")
    yield project
    with step("down -v"):
        project.run("down", "-v", "--timeout", "5")


@pytest.fixture(scope="module")
def client():
    with Client(list(URLS.values()), CLIENT, admin_token=ADMIN, retry_s=30.0, timeout=10.0) as c:
        yield c


def produce(client: Client, topic: str, n: int, first_ms: int, spread_ms: int) -> dict[str, int]:
    """``n`` messages due from now + ``first_ms`` over ``spread_ms``; {id: deliver_at}, all acknowledged."""
    now = int(time.time() * 1000)
    res = client.produce_batch(
        [
            {"topic": topic, "body": f"{topic} #{k}", "deliver_at": now + first_ms + k * spread_ms // n}
            for k in range(n)
        ]
    )
    failed = [r for r in res if isinstance(r, HorologeError)]
    assert not failed, f"{len(failed)} of {n} produces failed: {failed[0]}"
    return {r.id: r.deliver_at for r in res}


def consume_all(client: Client, topic: str, expected: dict[str, int], timeout_s: float = 60.0) -> dict:
    """Pull and ack until every expected message came, once each, none early; {id: message}."""
    got = {}
    deadline = time.monotonic() + timeout_s
    while set(got) != set(expected) and time.monotonic() < deadline:
        batch = client.pull(topic, GROUP, max=100, wait_ms=1000, visibility_ms=120_000)
        for m in batch:
            assert m.id not in got, f"{m.id} delivered twice"
            got[m.id] = m
        if batch:
            client.ack(topic, GROUP, batch.receipts())
    missing = set(expected) - set(got)
    assert not missing, f"{topic}: {len(missing)} of {len(expected)} messages never delivered"
    assert set(got) == set(expected), f"{topic}: messages nobody produced: {set(got) - set(expected)}"
    early = [m.id for m in got.values() if m.delivered_at < m.deliver_at]
    assert not early, f"{topic}: delivered before their time: {early}"
    return got


def agreed_master(nodes, exclude: str | None = None, timeout_s: float = 30.0) -> str:
    """The master every one of ``nodes`` names, once they agree on one other than ``exclude``."""
    found = []
    with RawClient(timeout=2.0) as http:

        def agree() -> bool:
            """the nodes agree on a new master"""
            seen = {http.get(f"{URLS[n]}/admin/status", token=ADMIN).result()["leader"] for n in nodes}
            found[:] = list(seen)
            return len(seen) == 1 and None not in seen and exclude not in seen

        wait_until(agree, timeout_s, interval_s=0.1)
    return found[0]


def all_up(project: ComposeProject) -> str:
    """Three healthy containers, every node linked to every other; the agreed master."""
    project.wait_healthy(NODES, timeout_s=120)
    return wait_ready(list(URLS.values()), timeout_s=60)


def faults(*args: str) -> str:
    res = subprocess.run(
        [sys.executable, "-m", "chaos_tests.faults", "--url", TOXIPROXY_URL, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 0, f"chaos_tests.faults {' '.join(args)}: {res.stderr}"
    return res.stdout.strip()


def release_on_stop(log: str) -> dict:
    """What the node logged when SIGTERM made it hand over (node/main.py)."""
    m = re.search(r"released mastership on shutdown: (\{.*\})", log)
    failed = re.search(r"could not release mastership on shutdown: .*", log)
    assert m, f"no handover in the stopped master's log: {failed[0] if failed else log[-2000:]}"
    return ast.literal_eval(m[1])


def test_compose_deployment(project, client):
    with step("up: three nodes healthy, one master"):
        project.run("up", "-d", "--no-build")
        master = all_up(project)
    assert project.networks() == {"host", "none"}, "compose made a network: only the host network is allowed"

    with step("produce, consume, delivered"):
        sent = produce(client, "first", 50, 0, 2000)
        consume_all(client, "first", sent)

    with step(f"SIGKILL {master}: a new master delivers everything"):
        due = produce(client, "killed", 100, 3000, 4000)
        project.run("kill", "-s", "SIGKILL", master)
        t_kill = time.monotonic()
        killed, master = master, agreed_master([n for n in NODES if n != master], exclude=master)
        note(f"{master} is master {time.monotonic() - t_kill:.1f} s after the SIGKILL of {killed}")
        due.update(produce(client, "killed", 50, 0, 2000))  # and through the new master
        consume_all(client, "killed", due)
        note(f"all {len(due)} messages delivered, none twice, none early")
    assert project.status(killed) == "exited"  # killed by hand: no restart

    with step(f"start {killed} again"):
        project.run("start", killed)
        master = all_up(project)

    with step(f"stop {master}: it hands over first"):
        due = produce(client, "stopped", 100, 500, 3000)
        project.run("stop", master)
        handover = release_on_stop(project.logs(master))
        consume_all(client, "stopped", due)
    assert handover["old_master"] == master and handover["new_master"] in NODES
    assert isinstance(handover["gap_ms"], float), handover
    note(f"handover logged by {master}: {handover}")

    with step(f"start {master} again"):
        project.run("start", master)
        all_up(project)

    with step("down, up: every scheduled message still there"):
        later = produce(client, "later", 200, 3_600_000, 60_000)  # an hour away
        soon = produce(client, "soon", 50, 1000, 2000)  # falls due while the cluster is down
        project.run("down", "--timeout", "15")
        assert {f"{PROJECT}_{n}-data" for n in NODES} <= project.volumes()
        project.run("up", "-d", "--no-build")
        all_up(project)
        for mid, deliver_at in later.items():
            st = client.status(mid)
            assert (st.state, st.deliver_at) == ("scheduled", deliver_at), st
        consume_all(client, "soon", soon)
        note(f"{len(later)} messages an hour away still scheduled; {len(soon)} due while down delivered")

    with step("isolate the master through the proxy, then heal"):
        isolated = agreed_master(NODES)
        note(faults("isolate", isolated))
        t_cut = time.monotonic()
        others = [n for n in NODES if n != isolated]
        master = agreed_master(others, exclude=isolated)
        note(f"{master} is master {time.monotonic() - t_cut:.1f} s after {isolated} was cut off")
        with Client([URLS[n] for n in others], CLIENT, retry_s=30.0, timeout=10.0) as majority:
            during = produce(majority, "isolated", 100, 0, 2000)
            consume_all(majority, "isolated", during)
        note(faults("heal"))
        all_up(project)
        after = produce(client, "healed", 50, 0, 1000)
        consume_all(client, "healed", after)
    assert master != isolated

    print("\ncompose-test: steps")
    for name, took in TIMINGS.items():
        print(f"  {took:7.1f} s  {name}")
