"""Bugs already fixed on main, put back by monkeypatch (sim/canaries.py), are caught by
random seeds (the ones below; tests/sim/test_scenarios.py has the scripted catches).

* ``no-finish-cut`` (#46 finding 1): a node that crashed between putting a Raft dump in
  place and cutting its journal cleared its whole journal at restart, losing entries it
  had fsynced and acknowledged. Seed 67 crashes n1 right after a dump (the
  ``crash_at_dump`` fault) while another node lags, so the restart leaves an acknowledged
  entry on one node only.
* ``no-commit-clamp`` (#46 finding 3): a snapshot message moved a follower's commit index
  to its own last index. Seed 31 cuts a master off while it holds entries it cannot
  commit; the others compact past them, and the snapshot shipped to it on its return
  takes several messages, between which it applied its own suffix.
* ``no-append-rule`` (1dceaa1): a follower cut every entry after ``prevLogIdx`` on each
  append, not only from the first conflict. Seed 34, its one-way drop n2 -> n3 alone: a
  stale append makes a follower drop entries it had applied (applied-never-cut).
* ``no-forward-refusal`` (07980b3), a leader that commits a proposal forwarded by a node
  that stepped down, is out of the random seeds' reach: a node that does not lead fails
  its waiting proposals before pysyncobj could forward them (``_before_proposals``). The
  refusal stays for a node of an older release in a rolling upgrade;
  tests/cluster/test_forwarded_proposals.py forces both.
* ``no-fresh-quorum``: a master served while a majority's clock readings were stale, by
  quorum time held since they went stale. Seed 2 with node services (``--service``):
  n2 and n1 crash in turn and n1 stops, n2's oscillator 20 % fast; the master serves
  with a peer just back before a fresh reading of it is in, so a lease of 885 ms ends
  about 110 ms earlier than asked (lease-as-asked).
* ``no-held-readings``: a clock reading that a link held was aged from its arrival.
  Seed 82 with node services: n2 blackholed for 2.9 s, then n1's link to the master n3
  dropping one way; when they heal, the readings held in the links arrive, counted
  fresh, and quorum time falls about 150 ms behind the true time (lease-as-asked).
* ``no-noop-sync``: a new leader counted its own copy of its no-op towards the commit
  before syncing it. Seed 408 with ``--power-loss``: n2 stopped, n3 cut off, then n1
  wins an election and the fsync after its no-op's commit fails (ENOSPC); its files as
  the power loss leaves them end before the entry it applied (applied-is-durable).
* ``no-lease-fail``: a master that stopped leading kept the leases its pulls had taken,
  not proposed yet, in its group commit. Seed 63 with ``--service --power-loss``: n3,
  split off for 1.2 s, comes back campaigning at a higher term; the master n2 steps down
  and is elected again, then proposes leases its pulls took in its first term, which
  its new scans no longer know: the same message goes to both consumers.
* ``no-answer-check`` (a pull answered once its leases committed, however long that
  took) left the random seeds when the workload's clients began to leave a master that
  answers 503 (as the SDK does): 0 of seeds 1..600 with ``--service``. The scenario
  ``answer-after-handover`` catches it (tests/sim/test_scenarios.py).

Found by ``python -m sim run --seeds 100 --canary NAME``, each seed's faults then shrunk
(``python -m sim shrink SEED --canary NAME``) to the few that still catch it, replayed
here with ``--keep``. Each pair of tests is the regression: the first fails if a fix is
removed, the second if the plan stops reaching the window (then shrink another seed from
such a run).
"""

from __future__ import annotations

import pytest

from .conftest import replay, sim

# canary: (seed, the faults kept, the invariants that catch it, the run's options)
CAUGHT = {
    "no-finish-cut": (67, "1,4", ("restart-keeps-committed", "acked-on-a-majority"), ()),
    "no-commit-clamp": (31, "2,3", ("same-index-same-entry",), ()),
    "no-append-rule": (34, "1", ("applied-never-cut",), ()),
    "no-fresh-quorum": (2, "0,2,3,4", ("lease-as-asked",), ("--service",)),
    "no-held-readings": (82, "1,4", ("lease-as-asked",), ("--service",)),
    "no-noop-sync": (408, "1,3,4,5", ("applied-is-durable",), ("--power-loss",)),
    "no-lease-fail": (63, "0,1,2,3", ("handed-out-inside-a-lease",), ("--service", "--power-loss")),
}


@pytest.mark.parametrize("canary", sorted(CAUGHT))
def test_with_the_fix_the_plan_passes(canary):
    seed, keep, _, options = CAUGHT[canary]
    result = replay(seed, "--keep", keep, *options)
    assert result["ok"], f"seed {seed} KEEP={keep}: {result['invariant']}: {result['detail']}"
    assert len(result["faults"]) == len(keep.split(","))


@pytest.mark.parametrize("canary", sorted(CAUGHT))
def test_without_the_fix_the_plan_fails_on_an_invariant(canary):
    seed, keep, invariants, options = CAUGHT[canary]
    result = replay(seed, "--keep", keep, "--canary", canary, *options)
    assert not result["ok"], f"seed {seed} KEEP={keep} no longer reaches the window of {canary}"
    assert result["invariant"] in invariants, result["detail"]


def test_shrink_leaves_the_one_fault_that_catches_the_append_rule():
    """Seed 97 draws two faults; without the append rule only the one-way drop is needed."""
    done = sim("shrink", "97", "--canary", "no-append-rule")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 of 2 faults still fail on applied-never-cut" in done.stdout
    assert "#0 2.090+1.056 one-way n2->n1 drop" in done.stdout
    assert "make sim SEED=97 KEEP=0 CANARY=no-append-rule" in done.stdout
