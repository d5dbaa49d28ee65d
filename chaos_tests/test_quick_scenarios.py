"""The quick chaos subset, in `make test`: SIGKILL of the master under recurring schedules,
ten forced releases under load, clock skew and steps, power loss, a follower back after
missing the add of the new master (scenarios.py marks them ``quick``), with the quick workload (run.py). Each
scenario's report goes to the test's tmp folder (printed).
``CHAOS_SEED`` fixes the seed; otherwise a new one is drawn and printed."""

from __future__ import annotations

import os
import random

import pytest

from .run import PHASE_ACKED, run_scenario
from .scenarios import SCENARIOS

SEED = int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(1, 1_000_000))


@pytest.mark.parametrize("name", [n for n, s in SCENARIOS.items() if s.quick])
def test_quick_scenario(name, toxiproxy, tmp_path):
    print(f"chaos seed {SEED} (CHAOS_SEED={SEED} repeats it); report in {tmp_path}")
    result = run_scenario(name, SEED, str(tmp_path / "work"), str(tmp_path), toxiproxy, quick=True)
    assert result["acknowledged"] >= 2 * PHASE_ACKED, "the workload hardly ran"
    assert result["faults"], "no fault was injected"
    assert result["violations"] == []
