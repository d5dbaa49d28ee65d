"""Whether the master writes a dump before feeding a joiner (cluster/raft/membership.py):
not when the joiner has applied the log up to an index the master's log still holds, at
most ``JOIN_FRESH_DUMP_ENTRIES`` behind."""

from __future__ import annotations

from horologe.cluster.raft.membership import JOIN_FRESH_DUMP_ENTRIES as FRESH
from horologe.cluster.raft.membership import needs_fresh_dump


def test_an_empty_joiner_is_fed_from_a_dump_at_most_so_far_behind():
    assert not needs_fresh_dump(0, FRESH)
    assert needs_fresh_dump(0, FRESH + 1)
    assert not needs_fresh_dump(5_000, 5_000 + FRESH)
    assert needs_fresh_dump(5_000, 5_000 + FRESH + 1)


def test_a_restored_joiner_is_fed_from_what_it_applied_while_the_log_holds_it():
    commit = 5_000 + 3 * FRESH
    assert not needs_fresh_dump(5_000, commit, applied=commit - FRESH)
    assert needs_fresh_dump(5_000, commit, applied=commit - FRESH - 1)  # too far behind
    assert needs_fresh_dump(5_000, commit, applied=4_999)  # the log no longer holds what follows
    assert needs_fresh_dump(5_000, commit, applied=commit + 1)  # past the commit: not this log's
    assert not needs_fresh_dump(0, FRESH + 10, applied=10)  # no dump yet: the whole log is held
