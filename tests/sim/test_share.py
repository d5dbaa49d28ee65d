"""The default suite's share of the simulator: 30 s of seeds on two jobs (about 60 seeds
of 3 nodes, each ~6 virtual s of faults, a heal, a restart of all and the end checks).
Any failure names its seed: ``make sim SEED=<seed>`` replays it."""

from __future__ import annotations

import pytest

from .conftest import sim

pytestmark = pytest.mark.solo  # two jobs of its own


def test_thirty_seconds_of_seeds_pass():
    done = sim("run", "--seconds", "30", "--start", "1", "--jobs", "2")
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert " 0 failed" in done.stdout


def test_twenty_seconds_of_seeds_with_node_services_pass():
    """The same with every node a NodeService and consumers on it (``--service``: about
    25 seeds), for the checks on what consumers receive (docs/simulator.md)."""
    done = sim("run", "--seconds", "20", "--start", "1", "--jobs", "2", "--service")
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert " 0 failed" in done.stdout
