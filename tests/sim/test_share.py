"""The default suite's share of the simulator, on two jobs: 30 s of seeds of 3 nodes (about
125, each ~6 virtual s of faults, a heal, a restart of all and the end checks), 15 s of
them drawing power losses that keep unsynced sectors in no order too, then 15 s with node
services, ticking and holding requests as the product does, and a recurring schedule
(about 17). Any failure names its seed: ``make sim SEED=<seed>`` (``POWER=1
OUT_OF_ORDER=1``, ``SERVICE=1 TIMED_WAITS=1 HOLD=1 SCHEDULES=1``) replays it."""

from __future__ import annotations

import pytest

from .conftest import sim

pytestmark = pytest.mark.solo  # two jobs of its own


def test_thirty_seconds_of_seeds_pass():
    done = sim("run", "--seconds", "30", "--start", "1", "--jobs", "2")
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert " 0 failed" in done.stdout


def test_fifteen_seconds_of_seeds_with_power_lost_out_of_order_pass():
    """Power losses, failed fsyncs and writes too (``--power-loss``), and a power loss may
    keep unsynced sectors in no order (``--out-of-order``, sim/disk.py)."""
    done = sim("run", "--seconds", "15", "--start", "1", "--jobs", "2", "--power-loss", "--out-of-order")
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert " 0 failed" in done.stdout


def test_fifteen_seconds_of_seeds_with_node_services_pass():
    """The same with every node a NodeService and the workload's clients on it
    (``--service``), for the checks on what consumers receive (docs/simulator.md); each
    node ticks as the product's tick thread does (``--timed-waits``), the clients'
    calls take the routes' master check with its hold (``--hold``), a recurring
    schedule fires, is paused and resumed (``--schedules``), some messages carry a
    lateness policy (``--lateness``), retention cuts (``--retention``), and a push
    subscription's messages go to a simulated receiver (``--push``)."""
    args = ("--service", "--timed-waits", "--hold", "--schedules", "--lateness", "--retention", "--push")
    done = sim("run", "--seconds", "15", "--start", "1", "--jobs", "2", *args)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert " 0 failed" in done.stdout
