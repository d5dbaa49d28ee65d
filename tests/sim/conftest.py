"""The simulator runs in its own processes (``python -m sim``): each seed needs its own
``PYTHONHASHSEED`` and patches every clock, which must not touch pytest's. Its disk
alone (``disk``) is installed in pytest's process, for tests of a file under power loss."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from horologe.storage import durable
from sim.disk import SyncedDisk
from sim.run import sim_root
from sim.world import fresh_dir

ROOT = Path(__file__).resolve().parents[2]


def sim(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sim", *args],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def replay(seed: int, *args: str) -> dict:
    """One seed in a fresh process: its result (sim/run.py ``Result``) as a dict."""
    done = sim("replay", str(seed), "--json", "--tail", "30", *args)
    assert done.stdout, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture
def disk():
    """The simulated disk (sim/disk.py) installed in this process over a fresh folder on
    tmpfs, and a node's folder in it: ``(disk, node)``."""
    folder = fresh_dir(os.path.join(sim_root(), f"disk-test-{os.getpid()}"))
    node = os.path.join(folder, "n1")
    os.mkdir(node)
    disk = SyncedDisk()
    disk.install(folder)
    try:
        yield disk, node
    finally:
        disk.uninstall()
        durable.forget_failure()
        fresh_dir(folder)
        os.rmdir(folder)
