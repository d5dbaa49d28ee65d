"""Bugs already fixed on main, put back by monkeypatch (sim/canaries.py), are caught.

``no-finish-cut`` (#46 finding 1): a node that crashed between putting a Raft dump in
place and cutting its journal cleared its whole journal at restart, losing entries it had
fsynced and acknowledged. Found by ``python -m sim run --seeds 100 --canary no-finish-cut``:
seed 67 crashes n1 right after a dump (the ``crash_at_dump`` fault) while another node
lags, so the restart leaves an acknowledged entry on one node only.

The pair of tests is the regression: the first fails if the fix is removed, the second if
the seed stops reaching the window (then pick another seed from such a run).
"""

from __future__ import annotations

from .conftest import replay

FINISH_CUT_SEEDS = (67,)


def test_with_the_fix_the_seeds_pass():
    for seed in FINISH_CUT_SEEDS:
        result = replay(seed)
        assert result["ok"], f"seed {seed}: {result['invariant']}: {result['detail']}"


def test_without_the_fix_the_seeds_fail_on_durability():
    for seed in FINISH_CUT_SEEDS:
        result = replay(seed, "--canary", "no-finish-cut")
        assert not result["ok"], f"seed {seed} no longer reaches the window"
        assert result["invariant"] in ("restart-keeps-committed", "acked-on-a-majority"), result["detail"]
