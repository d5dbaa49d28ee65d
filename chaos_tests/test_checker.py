"""The checker's verdict on nacks (a nacked hand-out is owed until its retry copy is
consumed) and on reschedules (a moved message is received once, under its id, at the time
it was moved to, never at an old one)."""

from __future__ import annotations

import numpy as np

from horologe.storage import MessageId, ready_rows

from .checker import check, violations
from .history import History

HOUR = 490_000
DUE = HOUR * 3_600_000 + 5_000


def _handout(h: History, mid: str, receipt: str, attempt: int = 0, due: int = DUE) -> None:
    """Message ``mid`` (key 1-1), due at ``due``, delivered 1 ms later and pulled at once."""
    h.add(
        "consumed",
        id=mid,
        receipt=receipt,
        sent_ms=due,
        at_ms=due + 2,
        node=0,
        consumer=0,
        deliver_at=due,
        delivered_at=due + 1,
        attempt=attempt,
        key="1-1",
    )


def _history(copies: int, nack_ok: bool = True) -> tuple[dict, dict]:
    """One message produced, handed out, nacked, and its copy consumed ``copies`` times
    (under ids of their own)."""
    h = History(seed=1)
    mid = str(MessageId(HOUR, 0))
    h.add("produced", id=mid, key="1-1", deliver_at=DUE, sent_ms=DUE - 1000, acked_ms=DUE - 990)
    _handout(h, mid, "r0")
    h.add("nacks", receipts=["r0"], sent_ms=DUE + 2, at_ms=DUE + 3, ok=nack_ok, error=None)
    for k in range(copies):
        _handout(h, str(MessageId(HOUR, 1 + k)), f"r{k + 1}", 1)
        h.add("acks", receipts=[f"r{k + 1}"], sent_ms=DUE + 1003, at_ms=DUE + 1004, ok=True, error=None)
    ready = ready_rows(HOUR, np.array([0]), 0, DUE, DUE + 1)
    return h.to_dict(), {"n1": ready}


def _verdict(copies: int, nack_ok: bool = True) -> tuple[dict, list[str]]:
    history, ready = _history(copies, nack_ok)
    result = check(history, ready, {"n1": None})
    return result, violations(result)


def test_a_nack_whose_copy_came_back_once_passes():
    result, found = _verdict(copies=1)
    assert result["nacked"] == 1 and result["nacked_not_retried"] == 0
    assert found == []


def test_a_nack_whose_copy_never_came_is_a_loss():
    result, found = _verdict(copies=0)
    assert result["nacked_not_retried"] == 1
    assert found == ["nacked_not_retried = 1"]


def test_one_nack_that_made_two_copies_is_a_duplicate():
    result, found = _verdict(copies=2)
    assert result["extra_retry_copies"] == 1
    assert found == ["extra_retry_copies = 1"]


def test_a_nack_that_failed_owes_no_copy():
    result, found = _verdict(copies=0, nack_ok=False)
    assert result["nacked"] == 0 and found == []


def _handed_out_again(acked_sent_ms: int, ok: bool = True) -> dict:
    """The message of :func:`_history` (no copy) handed out a second time, and acked."""
    history, ready = _history(copies=0)
    again = {**history["consumed"][0], "receipt": "r-again", "at_ms": DUE + 1}
    history["consumed"].append(again)
    ack = {"receipts": ["r-again"], "sent_ms": acked_sent_ms, "at_ms": acked_sent_ms + 1}
    history["acks"].append({**ack, "ok": ok, "error": None})
    return check(history, ready, {"n1": None})


def test_a_nack_after_an_ack_of_another_hand_out_owes_no_copy():
    """Handed out twice (its lease lost with a master): acked on one, then nacked on the other."""
    for ok in (True, False):  # an ack that failed may have been applied all the same
        result = _handed_out_again(acked_sent_ms=DUE + 2, ok=ok)
        assert result["nacked_not_retried"] == 0 and violations(result) == []


def test_a_nack_answered_before_the_other_ack_was_sent_still_owes_its_copy():
    result = _handed_out_again(acked_sent_ms=DUE + 10)
    assert violations(result) == ["nacked_not_retried = 1"]


def test_the_message_itself_handed_out_again_after_its_nack_is_a_duplicate():
    history, ready = _history(copies=1)
    again = {**history["consumed"][0], "receipt": "r-late", "sent_ms": DUE + 50, "at_ms": DUE + 51}
    history["consumed"].append(again)
    result = check(history, ready, {"n1": None})
    assert result["redeliveries_unexplained"] == 1


def test_earliness_is_allowed_only_within_the_windows_given():
    """A consumer saw the message 1 s before its deliver time (a master whose clock ran ahead)."""
    history, ready = _history(copies=1)
    history["consumed"][0]["at_ms"] = DUE - 1000
    inside = check(history, ready, {"n1": None}, 2000, [(DUE - 5000, DUE)])
    assert inside["early_true_max_ms"] == 1000 and violations(inside) == []
    outside = check(history, ready, {"n1": None}, 2000, [(DUE + 60_000, DUE + 70_000)])
    assert outside["early_true_beyond_allowance"] == 1 and len(violations(outside)) == 1
    assert violations(check(history, ready, {"n1": None}, 2000)) == []  # no windows: anywhere


OLD, NEW = DUE, DUE + 3_000  # a message's first deliver time, and the one it was moved to
ORIGINAL, COPY = str(MessageId(HOUR, 0)), str(MessageId(HOUR, 1))  # its id, its copy's place


def _moved(outcome: str = "ok", fired: tuple[int, ...] = (NEW,), resent: bool = False, new: int = NEW):
    """A message produced for OLD and moved to ``new`` (answered ``outcome``), which fired
    at each of the times ``fired`` (OLD at its own place, another at its copy's), was
    handed out then and acked: the checker's verdict."""
    h = History(seed=1)
    h.add("produced", id=ORIGINAL, key="1-1", deliver_at=OLD, sent_ms=OLD - 5000, acked_ms=OLD - 4990)
    h.add(
        "reschedules",
        id=ORIGINAL,
        key="1-1",
        by="id",
        batch=False,
        new_at=new,
        sent_ms=OLD - 2000,
        answered_ms=OLD - 1990,
        outcome=outcome,
        resent=resent,
    )
    for k, at in enumerate(fired):
        _handout(h, ORIGINAL, f"r{k}", due=at)
        h.add("acks", receipts=[f"r{k}"], sent_ms=at + 3, at_ms=at + 4, ok=True, error=None)
    gis = np.array([0 if at == OLD else 1 for at in fired])
    ready = ready_rows(HOUR, gis, 0, np.array(fired), np.array(fired) + 1)
    result = check(h.to_dict(), {"n1": ready}, {"n1": None}, answers_to={COPY: ORIGINAL})
    return result, violations(result)


def test_a_message_moved_and_received_once_at_its_new_time_passes():
    result, found = _moved()
    assert result["rescheduled"] == 1 and result["reschedules"] == {"ok": 1}
    assert found == [] and result["lost"] == 0 and result["not_in_ready_log"] == 0


def test_a_moved_message_that_fired_at_its_old_time_is_flagged():
    result, found = _moved(fired=(OLD,))
    assert result["rescheduled_at_old_time"] == 1 and result["rescheduled_at_old_time_ids"] == [ORIGINAL]
    assert "rescheduled_at_old_time = 1" in found
    assert result["early_true_beyond_allowance"] == 1  # seen 3 s before the time it was moved to


def test_a_moved_message_that_fired_at_both_times_is_flagged_twice_over():
    result, found = _moved(fired=(OLD, NEW))
    assert result["rescheduled_at_old_time"] == 1 and result["duplicates"] == 1
    assert result["redeliveries_unexplained"] == 1  # handed out again after its first ack
    assert "duplicates = 1" in found and "rescheduled_at_old_time = 1" in found


def test_a_moved_message_never_received_is_lost():
    result, found = _moved(fired=())
    assert result["lost"] == 1 and result["lost_ids"] == [ORIGINAL]
    assert "lost = 1" in found


def test_a_message_moved_sooner_is_not_early_at_its_new_time():
    result, found = _moved(new=OLD - 1_000, fired=(OLD - 1_000,))
    assert found == [] and result["early_true_max_ms"] == 0


def test_a_move_without_an_answer_allows_either_time_but_one_delivery():
    for fired in ((OLD,), (NEW,)):
        assert _moved(outcome="error: timed out", fired=fired)[1] == []
    assert _moved(outcome="error: timed out", fired=(OLD, NEW))[0]["duplicates"] == 1


def test_a_409_to_a_resent_move_allows_the_new_time():
    """The first send moved it, and its answer was lost with the master; it fired at its new
    time before the SDK's second send, which was answered already_delivered."""
    assert _moved(outcome="delivered", resent=True)[1] == []
    assert _moved(outcome="delivered", resent=False)[1] == ["rescheduled_at_old_time = 1"]


def test_a_hand_out_inside_another_live_lease_is_counted():
    """Leases are replicated: a message handed out again before the lease of an earlier
    hand-out ended, with that one neither acked nor nacked, is a violation; after it
    ended, or once acked, it is an explained redelivery."""
    mid = str(MessageId(HOUR, 0))

    def run(again_at: int, acked: bool) -> dict:
        h = History(seed=1)
        h.add("produced", id=mid, key="1-1", deliver_at=DUE, sent_ms=DUE - 1000, acked_ms=DUE - 990)
        _handout(h, mid, f"0@0.{DUE + 10_002}.ab.t")  # a 10 s lease from its pull
        if acked:
            h.add(
                "acks",
                receipts=[f"0@0.{DUE + 10_002}.ab.t"],
                sent_ms=DUE + 3,
                at_ms=DUE + 4,
                ok=False,
                error="x",
            )
        _handout(h, mid, f"0@0.{again_at + 10_000}.cd.t", due=again_at)
        return check(h.to_dict(), {"n1": ready_rows(HOUR, np.array([0]), 0, DUE, DUE + 1)}, {"n1": None})

    inside = run(DUE + 5_000, acked=False)
    assert (inside["redeliveries"], inside["inside_lease"]) == (1, 1)
    assert "inside_lease = 1" in violations(inside)
    assert run(DUE + 5_000, acked=True)["inside_lease"] == 1  # an ack that failed ends nothing
    assert run(DUE + 10_500, acked=False)["inside_lease"] == 0  # the lease had ended
