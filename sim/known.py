"""Seeds that fail on main for a reason already reported, by the bug they show.

``python -m sim run`` still runs and reports them (as ``KNOWN``, not failed), so the
time-boxed share of the default suite stays green while the bug is open; each one is also an
expected failure in tests/sim/test_known.py, which turns red once the bug is fixed (then
move it to :data:`FIXED`).

Seeds are of the default profile (3 nodes) at this commit: a change to the simulator's
draws moves them.
"""

from __future__ import annotations

# seed -> (the invariant it fails, why): none open now.
KNOWN: dict[int, tuple[str, str]] = {}

# Seeds that failed for a bug since fixed, by the bug: each must pass (tests/sim/test_known.py).
# Seeds 32 and 72 no longer reach that bug's window at this commit (with the fix taken away,
# sim/canaries.py no-store-index, they pass): the scripted scenario noop-dump-restart is its
# regression (tests/sim/test_scenarios.py).
FIXED: dict[int, str] = {
    32: "a Raft dump right after a new leader's no-op halted the node at restart (check_not_behind)",
    72: "a Raft dump right after a new leader's no-op halted the node at restart (check_not_behind)",
}
