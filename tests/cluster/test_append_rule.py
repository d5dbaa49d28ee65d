"""Raft's append rule on top of pysyncobj's: a follower's log is cut only on a conflict."""

from __future__ import annotations

from horologe.cluster.raft.append_rule import trim_append


def _log(*terms: int):
    """A follower log with entries 1..n of these terms: (term_at, last index)."""
    by_idx = {i + 1: t for i, t in enumerate(terms)}
    return by_idx.get, len(terms)


def _msg(prev: int, prev_term: int, entries=(), term: int = 2, commit: int = 0) -> dict:
    return {
        "type": "append_entries",
        "term": term,
        "commit_index": commit,
        "prevLogIdx": prev,
        "prevLogTerm": prev_term,
        "entries": [(b"cmd", idx, t) for idx, t in entries],
    }


def test_a_stale_heartbeat_keeps_the_entries_the_follower_holds():
    term_at, last = _log(1, 2, 2, 2, 2)  # 3..5 applied, of the leader's term 2
    out = trim_append(_msg(2, 2), term_at, last, commit_idx=5)
    assert (out["prevLogIdx"], out["prevLogTerm"], out["entries"]) == (5, 2, [])


def test_a_resend_of_held_entries_adds_nothing_and_cuts_nothing():
    term_at, last = _log(1, 2, 2, 2, 2)
    out = trim_append(_msg(2, 2, [(3, 2), (4, 2)]), term_at, last, commit_idx=3)
    assert (out["prevLogIdx"], out["entries"]) == (5, [])  # 5 has the leader's term: kept


def test_new_entries_after_held_ones_are_appended_after_them():
    term_at, last = _log(1, 2, 2)
    out = trim_append(_msg(1, 1, [(2, 2), (3, 2), (4, 2)]), term_at, last, commit_idx=1)
    assert (out["prevLogIdx"], out["prevLogTerm"]) == (3, 2)
    assert [e[1] for e in out["entries"]] == [4]


def test_a_conflicting_entry_is_still_cut_from_where_it_conflicts():
    term_at, last = _log(1, 1, 1)  # 2..3 from an old leader of term 1, never committed
    msg = _msg(1, 1, [(2, 2)])
    assert trim_append(msg, term_at, last, commit_idx=1) is msg  # pysyncobj cuts from 2
    term_at, last = _log(1, 2, 1)
    out = trim_append(_msg(1, 1, [(2, 2), (3, 2)]), term_at, last, commit_idx=1)
    assert (out["prevLogIdx"], [e[1:] for e in out["entries"]]) == (2, [(3, 2)])  # cut from 3


def test_stale_uncommitted_entries_of_another_term_are_not_kept_on_a_heartbeat():
    term_at, last = _log(1, 1, 1)  # 2..3: term 1, not committed, none of the leader's term after
    msg = _msg(1, 1, term=2)
    assert trim_append(msg, term_at, last, commit_idx=1) is msg  # pysyncobj cuts 2..3


def test_a_mismatch_at_prev_is_left_to_pysyncobj():
    term_at, last = _log(1, 1)
    msg = _msg(2, 2, [(3, 2)])
    assert trim_append(msg, term_at, last, commit_idx=0) is msg
    msg = _msg(7, 2)  # beyond the follower's log
    assert trim_append(msg, term_at, last, commit_idx=0) is msg


def test_an_up_to_date_message_is_passed_as_is():
    term_at, last = _log(1, 2)
    msg = _msg(2, 2, [(3, 2)])
    assert trim_append(msg, term_at, last, commit_idx=2) is msg
    msg = _msg(2, 2)
    assert trim_append(msg, term_at, last, commit_idx=2) is msg


def test_a_stale_heartbeat_keeps_older_term_entries_below_the_leaders_own():
    """Entries 4..5 of the leader's term came after a log check, so 2..3 (term 1, above the
    commit) are the leader's too: a heartbeat with a stale prev cut all four, entries the
    follower had acknowledged and the leader may have committed with."""
    term_at, last = _log(1, 1, 1, 2, 2)
    out = trim_append(_msg(1, 1, term=2), term_at, last, commit_idx=1)
    assert (out["prevLogIdx"], out["prevLogTerm"], out["entries"]) == (5, 2, [])
    out = trim_append(_msg(1, 1, [(2, 1)], term=2), term_at, last, commit_idx=1)
    assert (out["prevLogIdx"], out["prevLogTerm"], out["entries"]) == (5, 2, [])


def test_older_term_entries_after_the_last_of_the_leaders_term_are_still_cut():
    term_at, last = _log(1, 2, 2)  # none of a term-3 leader's: only the committed prefix is known
    out = trim_append(_msg(1, 1, term=3), term_at, last, commit_idx=2)
    assert (out["prevLogIdx"], out["prevLogTerm"]) == (2, 2)  # pysyncobj cuts 3
