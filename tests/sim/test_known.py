"""Each seed of sim/known.py still fails as recorded: a bug found by the simulator and
not fixed yet. Strict expected failures: once the bug is fixed the seed passes and the test
turns red (drop the seed from sim/known.py); a seed failing otherwise is red too."""

from __future__ import annotations

import pytest

from sim.known import KNOWN

from .conftest import replay


class FailsAsRecorded(Exception):
    pass


@pytest.mark.parametrize("seed", sorted(KNOWN))
@pytest.mark.xfail(strict=True, raises=FailsAsRecorded, reason="a known bug (sim/known.py)")
def test_known_seed_passes(seed):
    result = replay(seed)
    if not result["ok"]:
        assert result["invariant"] == KNOWN[seed][0], result["detail"]
        raise FailsAsRecorded(result["detail"])
