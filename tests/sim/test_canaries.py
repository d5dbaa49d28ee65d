"""Bugs already fixed on main, put back by monkeypatch (sim/canaries.py), are caught by
random seeds (the ones below; tests/sim/test_scenarios.py has the scripted catches).

* ``no-finish-cut`` (#46 finding 1): a node that crashed between putting a Raft dump in
  place and cutting its journal cleared its whole journal at restart, losing entries it
  had fsynced and acknowledged. Seed 67 crashes n1 right after a dump (the
  ``crash_at_dump`` fault): restarted, it no longer holds committed entries it held
  before (restart-keeps-committed).
* ``no-commit-clamp`` (#46 finding 3): a snapshot message moved a follower's commit index
  to its own last index. Seed 31 cuts a master off while it holds entries it cannot
  commit; the others compact past them, and the snapshot shipped to it on its return
  takes several messages, between which it applied its own suffix.
* ``no-append-rule`` (1dceaa1): a follower cut every entry after ``prevLogIdx`` on each
  append, not only from the first that conflicts. Random seeds reached it (seed 34)
  through a refusal of an append sent before the leader had already stepped the
  follower back: it set the follower's next index back once more after it had caught
  up, and the resent append, shorter than the follower's log, cut entries it had
  applied. Since refusals like that move nothing (``RaftNode._refusal_as_raft_has_it``),
  0 of seeds 1..1,500 reach it; with that fix taken away too, the scenario
  ``long-silence`` catches it (tests/sim/test_scenarios.py).
* ``no-forward-refusal`` (07980b3), a leader that commits a proposal forwarded by a node
  that stepped down, is out of the random seeds' reach: a node that does not lead fails
  its waiting proposals before pysyncobj could forward them (``_before_proposals``). The
  refusal stays for a node of an older release in a rolling upgrade;
  tests/cluster/test_forwarded_proposals.py forces both.
* ``no-leader-sync`` (b10ca26), a leader that synced what it appended only before its
  apply, after counting its own copy towards the commit: every seed, with no fault at
  all, fails ``leader-counts-its-disk`` (the world checks each commit index a leader
  sets against what its journal had synced, sim/world.py). No fault plan turns it into a
  loss here, since pysyncobj applies, and so syncs, in the tick that commits, before it
  sends the commit on; the invariant is Raft's rule itself.
* ``no-answer-sync`` (42feea4, its follower half), a follower that answered its leader
  before syncing the entries it reports: every seed, with no fault, fails
  ``answer-from-its-disk`` (checked as the answer is sent). The sync each tick makes
  after handling its messages would hide it from a loss.
* ``no-proposal-fail,no-forward-refusal`` (07980b3 with the later fix that masks it): a
  node that keeps its proposals once it no longer leads, as a node of an older release
  does in a rolling upgrade, forwards them to the next leader, which must refuse them.
  Seed 2 stops the master n1 (SIGSTOP): proposals made before it learnt it was deposed
  are forwarded, and without the refusal committed (``proposed-by-its-leader``), the bug
  07980b3 fixed, which the chaos suite found after a SIGSTOP. With only the later fix
  taken away, the refusal holds (0 of seeds 1..200 fail).
* ``no-vote-sync,no-restart-hold`` (42feea4's term and vote half, with the later fix that
  masked it): term and vote reached the disk up to a second after the vote was sent, and
  a node that starts grants votes at once. Seed 680 with ``--power-loss``, faults
  0,1,5,6 (n1 stopped; n3 isolated, then its power lost; a failed write of n2's): a node
  votes in term 2, loses that vote with its process, and votes again in term 2 once
  back (``one-vote-per-term``; or ``one-leader-per-term``: two nodes lead term 2). A
  node that starts grants no vote for the election timeout, which hid the lost sync
  while the second request came within it; a candidate now asks for pre-votes first
  (cluster/raft/pre_vote.py), so in this plan the request comes later and the sync alone
  taken away fails too. With only the hold taken away, the plan passes. The pinned seed
  moves whenever the timing of the Raft link does (seeds 59, 680 and 749 were pinned
  before); 3 of seeds 1..1,500 catch the pair.
* ``no-fresh-quorum``: a master served while a majority's clock readings were stale, by
  quorum time held since they went stale. Seed 17 with node services (``--service``),
  fault 3: n3's clocks stepped an hour ahead; its readings go stale, and the master
  serves by quorum time held from them, so a lease ends earlier than asked
  (lease-as-asked).
* ``no-held-readings``: a clock reading that waited on the way was aged from its arrival.
  Seed 56 with node services: n1 isolated for 0.6 s (dropping: the readings it sends
  wait in the links), a forced release of the master, then n3 split off; readings that
  waited count fresh, quorum time falls behind the true time, and a lease ends earlier
  than asked (lease-as-asked).
* ``no-wait-in-echo``: a keep-alive's echo held only the time since the echoed one was
  read, not its wait to be read. Seed 100167 with node services, power losses,
  membership changes, timed waits and held requests: n2's clocks step +3 s, so its
  transit window for n3 starts again; n3 is stopped for 0.6 s and, woken, echoes n2's
  keep-alive that waited in its socket; half that round trip is taken as the transit,
  quorum time runs 36 ms ahead, and after three forced releases n2, master again, hands a
  message out 28 ms early (handed-out-early).
* ``no-noop-sync``: a new leader counted its own copy of its no-op towards the commit
  before syncing it. Seed 408 with ``--power-loss``: n2 stopped, n3 cut off, then n1
  wins an election and the fsync after its no-op's commit fails (ENOSPC); its files as
  the power loss leaves them end before the entry it applied (applied-is-durable).
  ``leader-counts-its-disk`` sees it sooner, as the no-op's commit is counted (9 of
  seeds 1..10 without power loss).
* ``no-answer-check`` (a pull answered once its leases committed, however long that
  took) left the random seeds when the workload's clients began to leave a master that
  answers 503 (as the SDK does): 0 of seeds 1..600 with ``--service``. The scenario
  ``answer-after-handover`` catches it (tests/sim/test_scenarios.py).
* ``no-shielded-sync`` (a master's S entry waited on in a task a stop of its run could
  cancel before the task's first step) left the random seeds when a keep-alive's clock
  reading came to be taken only when vouched for (``no-unvouched-readings``), which moves
  every seed's timing: 0 of seeds 1..1400 with ``--service`` and 1..400 with
  ``--service --power-loss``. tests/node/test_wheel_driver.py holds the fix
  (``test_a_sync_let_go_before_its_wait_ran_still_takes_the_proposals_refusal``).

* ``no-unvouched-readings`` (every keep-alive's reading taken, aged against the window's
  least late: seed 409 with ``--service --power-loss --membership --commit-at-once``
  caught it, n2 restarted while cut off from n1 took its first keep-alives from n1, all
  held, and stamped a lease 375 ms short) left the random seeds when leases came to be
  paused between terms (cluster/leases.py), which moves every seed's timing: 0 of seeds
  1..575 with those options. tests/cluster/test_peer_clocks.py holds the fix
  (``test_a_window_of_held_keepalives_alone_gives_no_reading``).
* ``no-dump-held-journal`` (a journal's first frame, torn after a snapshot install, taken
  for damage: seed 8 with ``--service --power-loss --membership --spares-first
  --commit-at-once`` caught it, all eight faults needed) and ``no-lease-fail`` (a master
  that stopped leading kept the leases its pulls had taken, not proposed yet, in its
  group commit: seed 369 with ``--service``, 1 of seeds 201..372) left the random seeds
  when leases came to be paused after a silence within a term too: 0 of seeds 1..217
  and 1..200 with those options. tests/cluster/test_raft_journal.py
  (``test_a_torn_first_entry_after_a_snapshot_install_is_set_aside``) and
  tests/node/test_consumers_scan.py
  (``test_the_leases_a_pull_queued_are_never_proposed_once_its_node_stops_leading``)
  hold the fixes.

* ``no-cut-fsync`` (a store's commit journal cut at open and not fsynced before the
  replay wrote over it: seed 7069 with ``--service --power-loss --membership
  --spares-first --out-of-order --sync-interval-ms 50`` caught it) left the random seeds
  as later fixes moved every seed's timing: 0 of seeds 7556..8401 with those options.
  tests/sim/test_out_of_order.py forces its window on the simulated disk
  (``test_the_cut_at_open_is_durable_so_a_torn_tail_never_comes_back_under_a_replay``).

* ``no-own-dump-kept`` (a follower shipped a snapshot older than its own dump loads the
  shipped one, and its journal is cleared) is not pinned: no seed ships a follower a
  snapshot older than its own dump (0 of seeds 1..300 with ``--power-loss``, 1..200 with
  ``--service --membership``, counted by instrumenting the install).
  tests/cluster/test_snapshot_install.py holds the fix
  (``test_an_install_older_than_the_followers_own_dump_keeps_its_journal``).
* ``no-durable-receipt`` (a shipped dump received as pysyncobj does, into a temp file
  renamed over the node's own dump unsynced) is not pinned: no random seed loses the power
  during an install (0 of seeds 1..902 with ``--power-loss --membership``, 1..303 with
  ``--service --power-loss --membership --spares-first``). The scripted scenario
  ``power-in-install`` catches it (tests/sim/test_scenarios.py).

* ``no-ship-wait`` (914a6e8 taken back: a shipment whose dump names a file retention
  removed returns None, and pysyncobj's send loop begins the same dump again at once)
  is not pinned here: seed 3 with ``--service --retention`` never ends its tick, as the
  simulator's clock does not move within one, and fails only once its process passes
  the 4 GiB a seed may map (about 80 s; sim/commands.py, ``SEED_MEMORY_BYTES``).
  tests/sim/test_retention.py replays the seed, and
  tests/cluster/test_snapshot_shipping.py holds the fix.

* ``no-later-term`` (a node whose term got ahead of its leader's dropped the leader's
  appends unanswered, pysyncobj's way, and with the pre-vote never stood again to carry
  its term) is not pinned: seed 700646 with ``--power-loss --service --membership
  --spares-first --out-of-order --timed-waits --hold`` (found on main, before the fix:
  n4, added while partitions came and went, stayed in term 5 under a leader of term 4,
  following no one) no longer reaches it since the node loop's waits changed (9a064aa),
  nor do any of seeds 700001..700294 with those options.
  tests/cluster/test_pre_vote.py holds the fix
  (``test_a_node_ahead_of_its_leaders_term_answers_an_append_with_its_term``).

* ``no-kept-cancel`` (9a064aa taken back: a pull waits for new messages through Python
  3.11's ``asyncio.wait_for``, which drops a cancel that comes as its wait ends) is out
  of the random seeds' reach since the push worker waits for the groups it stopped
  (b99acf8): seed 24 with ``--service --push``, faults 5 and 6, caught it when a group
  cancelled as its subscription was replaced went on past its worker, failing each
  message through the closed pool (push-nacked-unsent); now its pool stays open while
  it runs on, and 0 of seeds 1..79 with those options (1..39 with ``--membership
  --power-loss`` too) fail. tests/node/test_cancelled_waits.py holds the fix.
* ``no-owner-reads`` (93aebaf taken back: a retry topic counts for retention only the
  groups with progress on it: a group's first retries were trimmed unread once
  ``retention_ms`` passed) left the random seeds when a pull came to hand out a topic's
  retries fallen due before its own messages: they are no longer left waiting behind the
  topic for 300 ms, 0 of seeds 1..119 with ``--service --retention --push``.
  tests/cluster/test_retention.py holds the fix.
* ``no-known-clock`` (8288fd5 taken back: a master that never had a majority's clock
  readings stamps what it proposes by its own clock): seed 970300 with every option of
  the node services and ``--push``, faults 0,1,3,4,5,6,7,8 (found by ``python -m sim run
  --start 970001 --canary no-known-clock`` with those options, 1 of 304 seeds, then
  shrunk; n2's clocks stepped 3 s ahead among them): a message is handed to the push
  worker 16 ms before its time (handed-out-early; with an hour's step, a master stamping
  its term's first entry so moved every running lease on by the hour, push-liveness).
* ``no-retry-id`` (a retry filed under an id of its own, as before retries carried their
  first message's ``x-horologe-id``): seed 1 with ``--service``, no fault at all: a
  consumer's nack is retried and the retry handed out under another id than the
  message produced with its body (retry-id).

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
    "no-finish-cut": (67, "1", ("restart-keeps-committed", "acked-on-a-majority"), ()),
    "no-commit-clamp": (31, "2,3", ("same-index-same-entry",), ()),
    "no-fresh-quorum": (17, "3", ("lease-as-asked",), ("--service",)),
    "no-held-readings": (56, "0,4,5", ("lease-as-asked",), ("--service",)),
    "no-wait-in-echo": (
        100167,
        "1,2,3",
        ("handed-out-early",),
        ("--service", "--power-loss", "--membership", "--timed-waits", "--hold"),
    ),
    "no-noop-sync": (408, "1,3,4,5", ("applied-is-durable", "leader-counts-its-disk"), ("--power-loss",)),
    "no-leader-sync": (1, "none", ("leader-counts-its-disk",), ()),
    "no-answer-sync": (1, "none", ("answer-from-its-disk",), ()),
    "no-proposal-fail,no-forward-refusal": (2, "2", ("proposed-by-its-leader",), ()),
    "no-vote-sync,no-restart-hold": (
        680,
        "0,1,5,6",
        ("one-vote-per-term", "one-leader-per-term"),
        ("--power-loss",),
    ),
    "no-retry-id": (1, "none", ("retry-id",), ("--service",)),
    "no-known-clock": (
        970300,
        "0,1,3,4,5,6,7,8",
        ("handed-out-early", "pushed-early", "push-liveness"),
        (
            "--service",
            "--power-loss",
            "--membership",
            "--out-of-order",
            "--timed-waits",
            "--hold",
            "--schedules",
            "--lateness",
            "--retention",
            "--push",
        ),
    ),
}


@pytest.mark.parametrize("canary", sorted(CAUGHT))
def test_with_the_fix_the_plan_passes(canary):
    seed, keep, _, options = CAUGHT[canary]
    result = replay(seed, "--keep", keep, *options)
    assert result["ok"], f"seed {seed} KEEP={keep}: {result['invariant']}: {result['detail']}"
    assert len(result["faults"]) == (0 if keep == "none" else len(keep.split(",")))


def test_a_node_that_keeps_its_proposals_is_held_back_by_the_refusal_alone():
    """The plan that catches the pair above passes with only the proposals' failing taken
    away: the leader's refusal of forwarded proposals (07980b3) is what holds then."""
    seed, keep, _, options = CAUGHT["no-proposal-fail,no-forward-refusal"]
    result = replay(seed, "--keep", keep, "--canary", "no-proposal-fail", *options)
    assert result["ok"], f"{result['invariant']}: {result['detail']}"


def test_a_vote_lost_with_the_power_is_not_given_again_with_the_hold_taken_away():
    """The plan that catches the pair above passes with the restart hold taken away
    alone: a vote synced before it is sent is enough."""
    seed, keep, _, options = CAUGHT["no-vote-sync,no-restart-hold"]
    result = replay(seed, "--keep", keep, "--canary", "no-restart-hold", *options)
    assert result["ok"], f"{result['invariant']}: {result['detail']}"


def test_without_the_vote_sync_alone_the_plan_fails():
    """... and fails with the sync alone taken away: the restart hold no longer hides it."""
    seed, keep, invariants, options = CAUGHT["no-vote-sync,no-restart-hold"]
    result = replay(seed, "--keep", keep, "--canary", "no-vote-sync", *options)
    assert not result["ok"] and result["invariant"] in invariants, result["detail"]


@pytest.mark.parametrize("canary", sorted(CAUGHT))
def test_without_the_fix_the_plan_fails_on_an_invariant(canary):
    seed, keep, invariants, options = CAUGHT[canary]
    result = replay(seed, "--keep", keep, "--canary", canary, *options)
    assert not result["ok"], f"seed {seed} KEEP={keep} no longer reaches the window of {canary}"
    invariant = result["invariant"]
    if invariant == "exception":  # named by what was raised: "exception: CorruptLogError"
        raised = result["detail"].splitlines()[-1].split(":")[0]
        invariant = f"exception: {raised.rpartition('.')[2]}"
    assert invariant in invariants, result["detail"]


def test_shrink_leaves_the_fault_that_catches_the_journal_cut():
    """Seed 67 draws five faults; without the journal cut at load, a crash at a dump is all
    it needs."""
    done = sim("shrink", "67", "--canary", "no-finish-cut")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 of 5 faults still fail on restart-keeps-committed" in done.stdout
    assert "#1 2.789+1.674 crash n1 at its next dump" in done.stdout
    assert "make sim SEED=67 KEEP=1 CANARY=no-finish-cut" in done.stdout


# A service that answers an edit, an extend or a pause as made without making it, a
# master that skips a schedule's firings whose time passed, one that ignores or loses a
# message past its lateness allowance, or a push group that sends before the time or acks
# a failed push: the workload's checks catch it
# (sim/workload.py), so that they can fail. All the seed's faults; (invariant, options,
# seed): seed 1, but for fake-skip-passed, which needs a master elected after fire times
# passed unplanned (seed 14).
FAKES = {
    "fake-cancel": ("cancelled-handed-out", (), 1),
    "fake-move": ("rescheduled-at-old-time", (), 1),
    "fake-extend": ("handed-out-inside-a-lease", (), 1),
    "fake-skip-passed": ("schedule-missed", ("--schedules",), 14),
    "fake-pause": ("schedule-fired-while-paused", ("--schedules",), 1),
    "fake-late-deliver": ("late-policy", ("--lateness",), 1),
    "fake-late-lose": ("ready-logs", ("--lateness",), 1),
    "fake-push-early": ("pushed-early", ("--push",), 1),
    "fake-push-ack-failed": ("push-liveness", ("--push",), 1),
}


@pytest.mark.parametrize("fake", sorted(FAKES))
def test_the_workload_catches_a_service_that_does_not_do_what_it_answers(fake):
    invariant, options, seed = FAKES[fake]
    result = replay(seed, "--service", *options, "--canary", fake)
    assert not result["ok"], f"{fake} not caught"
    assert result["invariant"] == invariant, result["detail"]
