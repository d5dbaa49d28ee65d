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


if KNOWN:

    @pytest.mark.parametrize("seed", sorted(KNOWN))
    @pytest.mark.xfail(strict=True, raises=FailsAsRecorded, reason="a known bug (sim/known.py)")
    def test_known_seed_fails_as_recorded(seed):
        result = replay(seed)
        if not result["ok"]:
            assert result["invariant"] == KNOWN[seed][0], result["detail"]
            raise FailsAsRecorded(result["detail"])
