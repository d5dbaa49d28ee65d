"""The default suite's share of the simulator, on two jobs: 45 s of seeds of 3 nodes (about
190, each ~6 virtual s of faults, a heal, a restart of all and the end checks), then 15 s
with node services (about 17): some 200 seeds a minute. Any failure names its seed:
``make sim SEED=<seed>`` (``SERVICE=1``) replays it."""

from __future__ import annotations

import pytest

from .conftest import sim

pytestmark = pytest.mark.solo  # two jobs of its own


def test_forty_five_seconds_of_seeds_pass():
    done = sim("run", "--seconds", "45", "--start", "1", "--jobs", "2")
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert " 0 failed" in done.stdout


def test_fifteen_seconds_of_seeds_with_node_services_pass():
    """The same with every node a NodeService and the workload's clients on it
    (``--service``), for the checks on what consumers receive (docs/simulator.md)."""
    done = sim("run", "--seconds", "15", "--start", "1", "--jobs", "2", "--service")
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert " 0 failed" in done.stdout
