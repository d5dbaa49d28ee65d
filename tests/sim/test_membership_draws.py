"""Changes of the membership drawn by a seed (``--membership``, sim/membership.py): asked of
whichever node leads while the seed's other faults run, and every invariant holds."""

from __future__ import annotations

from .conftest import replay


def test_a_spare_added_a_member_replaced_and_another_spare_added_under_faults():
    """Seed 4 adds n4, removes n3 and adds n5 while n1 is stopped and drifting, n2's
    clock is 3 s behind and n3's steps 500 ms ahead; each change is made once asked."""
    result = replay(4, "--membership")
    assert result["ok"], result["detail"]
    assert any("membership: add n4, then rem a non-leader, then add n5" in f for f in result["faults"])
    assert result["counts"].get("membership add made") == 2, result["counts"]
    assert result["counts"].get("membership rem made") == 1, result["counts"]
