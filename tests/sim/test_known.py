"""Seeds the simulator failed on: a bug still open fails as recorded (sim/known.py KNOWN,
strict expected failures that turn red once it is fixed), and one fixed passes (FIXED)."""

from __future__ import annotations

import pytest

from sim.known import FIXED, KNOWN

from .conftest import replay


class FailsAsRecorded(Exception):
    pass


@pytest.mark.parametrize("seed", sorted(FIXED))
def test_a_seed_of_a_fixed_bug_passes(seed):
    result = replay(seed)
    assert result["ok"], f"{FIXED[seed]}: {result['invariant']}: {result['detail']}"


def test_a_majority_ahead_through_a_stopped_nodes_last_reading_is_within_the_slack():
    """Seed 158 with node services: n3 stopped while its clocks ran 500 ms ahead, and the
    master's went 500 ms ahead while n3's last reading was still fresh. Quorum time ran
    500 ms ahead, as the design allows a majority's clocks: a lease ended that early is
    no violation (sim/workload.py counts each node at its most ahead over the window)."""
    result = replay(158, "--service")
    assert result["ok"], f"{result['invariant']}: {result['detail']}"
    assert result["answers"]["slack ms"] >= 500


if KNOWN:

    @pytest.mark.parametrize("seed", sorted(KNOWN))
    @pytest.mark.xfail(strict=True, raises=FailsAsRecorded, reason="a known bug (sim/known.py)")
    def test_known_seed_fails_as_recorded(seed):
        result = replay(seed)
        if not result["ok"]:
            assert result["invariant"] == KNOWN[seed][0], result["detail"]
            raise FailsAsRecorded(result["detail"])
