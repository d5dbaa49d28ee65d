"""Seeds that fail on main for a reason already reported, by the bug they show.

``python -m sim run`` still runs and reports them (as ``KNOWN``, not failed), so the
time-boxed share of the default suite stays green while the bug is open; each one is also an
expected failure in tests/sim/test_known.py, which turns red once the bug is fixed (then
drop it from here).

Seeds are of the default profile (3 nodes) at this commit: a change to the simulator's
draws moves them.
"""

from __future__ import annotations

# seed -> (the invariant it fails, why)
_NOOP_DUMP = (
    "no-halt",
    "a Raft dump taken when the last applied entry is pysyncobj's no-op (a new leader's first "
    "entry, which never reaches the store) names an index the store never records; a crash "
    "before the store's next sync point then halts the node at restart (StoreBehindDumpError)",
)

KNOWN: dict[int, tuple[str, str]] = {32: _NOOP_DUMP, 72: _NOOP_DUMP}
