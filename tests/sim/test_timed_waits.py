"""``--timed-waits``: a simulated node ticks as the product's tick thread does, when its
wait ends (``RaftNode._tick_wait``: its next heartbeat or election deadline, ``tick_s``
while work goes on, at most ``idle_tick_s``) or as soon as a message arrives for it (the
poll returns), rather than every ``tick_s`` on a grid."""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict

from .conftest import replay, sim

STEP = re.compile(r"\d+ t=([\d.]+) \w+ (\S+) (\S+) \|")


def _steps(seed: int, *args: str) -> tuple[dict, list[tuple[float, str, str]]]:
    """A seed's result and every step of its trace as (virtual s, node, what ran)."""
    done = sim("replay", str(seed), "--json", "--tail", "1000000", *args)
    assert done.stdout, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    steps = [(float(m[1]), m[2], m[3]) for m in map(STEP.match, result["trace_tail"]) if m]
    assert len(steps) == result["steps"]
    return result, steps


def _arrivals_followed_by_a_tick(steps) -> tuple[int, int]:
    """How many message arrivals at a node its tick follows within 0.2 ms, of how many."""
    followed = arrivals = 0
    for i, (t, node, what) in enumerate(steps):
        if what != "_arrive":
            continue
        arrivals += 1
        for t2, node2, what2 in steps[i + 1 :]:
            if t2 - t > 0.0002:
                break
            if (node2, what2) == (node, "tick"):
                followed += 1
                break
    return followed, arrivals


def _long_waits(steps, tick_s: float) -> int:
    """Gaps between two ticks of one node longer than 2.5 ticks."""
    ticks = defaultdict(list)
    for t, node, what in steps:
        if what == "tick":
            ticks[node].append(t)
    return sum(b - a > 2.5 * tick_s for times in ticks.values() for a, b in itertools.pairwise(times))


def test_a_node_ticks_when_a_message_arrives_and_waits_for_its_next_timed_step_when_idle():
    timed, steps = _steps(1, "--timed-waits")
    assert timed["ok"], timed["detail"]
    followed, arrivals = _arrivals_followed_by_a_tick(steps)
    assert arrivals > 500 and followed >= 0.95 * arrivals, (followed, arrivals)
    assert _long_waits(steps, timed["knobs"]["tick_s"]) > 100

    grid, steps = _steps(1)
    followed, arrivals = _arrivals_followed_by_a_tick(steps)
    assert arrivals > 500 and followed < 0.2 * arrivals, (followed, arrivals)
    assert _long_waits(steps, grid["knobs"]["tick_s"]) < 10  # a node stopped or down
    assert timed["steps"] < grid["steps"]


def test_timed_waits_replay_bit_for_bit():
    first, second = (replay(3, "--timed-waits", "--service") for _ in range(2))
    assert first["ok"], first["detail"]
    assert first["trace_hash"] == second["trace_hash"]
    assert first["trace_hash"] != replay(3, "--service")["trace_hash"]
