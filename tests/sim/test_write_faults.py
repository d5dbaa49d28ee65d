"""Faults of a write (sim/disk.py, ``--power-loss`` only): a write that fails, and the
disk stays full (ENOSPC) or failing (EIO) until the fault ends; a process that dies in
its write, a prefix of it in the page cache, then maybe the power too."""

from __future__ import annotations

from .conftest import replay


def test_a_failed_write_of_term_and_vote_ends_the_process():
    """Seed 31, its reset and its write fault only: n1, leading term 1, is asked to vote in
    term 2 and its write of the new term fails (EIO). pysyncobj has taken term 2 in memory
    and the write raised before it stepped down; its tick thread logs what a tick raises
    and ticks again, so n1 went on leading, at term 2, beside the node elected in it
    (``one-leader-per-term``, at d00c82e). A failed write of Raft state now ends the
    process as a failed fsync does (storage/durable.py ``write_failed``)."""
    first, second = (replay(31, "--power-loss", "--keep", "1,5") for _ in range(2))
    assert first["ok"], first["detail"]
    assert first["faults"][-1] == "#5 1.182+1.580 write 25 of n1 fails (EIO, 41% written)"
    assert first["trace_hash"] == second["trace_hash"]


def test_a_crash_in_a_write_then_a_power_loss_replays():
    """Seed 12: n3's process dies in its 47th write from 1.93 s (of the store's commit
    journal) and the power goes: files torn and dropped by the seed."""
    first, second = replay(12, "--power-loss"), replay(12, "--power-loss")
    assert first["ok"], first["detail"]
    assert "crash n3 in its write 47" in first["faults"][-1]
    assert first["trace_hash"] == second["trace_hash"]


def test_a_process_that_ends_in_a_write_pysyncobj_catches_goes_down_all_the_same():
    """Seed 1526: a node dies in a write while installing a shipped snapshot, and
    pysyncobj's bare ``except`` around the install catches the exit; the rest of that step
    (the shell reading the journal the install had just cleared) is not real, and the node
    goes down as a process that ended there would. Other fixes have since moved the seed's
    timing out of that window (with sim/world.py's handling taken out it passes); it stays
    as a run with a death in a write."""
    result = replay(1526, "--power-loss")
    assert result["ok"], result["detail"]
    assert any("in its write" in fault for fault in result["faults"])


def test_what_a_process_sends_after_it_ended_in_a_write_is_not_judged():
    """Seed 9150: n2 dies in a write of its journal while installing a shipped snapshot;
    pysyncobj catches the exit and, in the rest of that step, answers the leader with the
    snapshot's index while its journal still holds the old entries. A real process would
    have sent nothing, so answer-from-its-disk does not judge that answer. Its faults as
    drawn before clock steps were (``--keep``): the step the seed draws now, before the
    write, takes the run elsewhere. Other fixes have since moved it out of that window too
    (with the check taken out it passes); it stays as a run with a death in a write."""
    result = replay(9150, "--power-loss", "--keep", "0,1,2,3")
    assert result["ok"], result["detail"]
    assert any("in its write" in fault for fault in result["faults"])
