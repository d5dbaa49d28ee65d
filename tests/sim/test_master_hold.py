"""``--hold``: the workload's calls take the HTTP routes' master check (``MasterHold.check``,
node/master_hold.py), which holds a request while its master may not serve for a moment
(a lapsed read lease, a barrier not yet applied), rather than refusing it at once."""

from __future__ import annotations

from .conftest import replay

HELD = "requests held, then served"


def test_a_request_to_a_master_that_may_not_serve_for_a_moment_is_held_then_served():
    held = replay(1, "--service", "--hold")
    assert held["ok"], held["detail"]
    assert held["counts"].get(HELD, 0) > 0, held["counts"]
    assert HELD not in replay(1, "--service")["counts"]
