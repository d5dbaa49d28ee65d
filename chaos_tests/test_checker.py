"""The checker's verdict on nacks: a nacked hand-out is owed until its retry copy is consumed."""

from __future__ import annotations

import numpy as np

from horologe.storage import MessageId, ready_rows

from .checker import check, violations
from .history import History

HOUR = 490_000
DUE = HOUR * 3_600_000 + 5_000


def _history(copies: int, nack_ok: bool = True) -> tuple[dict, dict]:
    """One message produced, handed out, nacked, and its copy consumed ``copies`` times
    (under ids of their own)."""
    h = History(seed=1)
    mid = str(MessageId(HOUR, 0))
    h.add("produced", id=mid, key="1-1", deliver_at=DUE, sent_ms=DUE - 1000, acked_ms=DUE - 990)

    def handout(i: str, receipt: str, attempt: int) -> None:
        h.add(
            "consumed",
            id=i,
            receipt=receipt,
            sent_ms=DUE,
            at_ms=DUE + 2,
            node=0,
            consumer=0,
            deliver_at=DUE,
            delivered_at=DUE + 1,
            attempt=attempt,
            key="1-1",
        )

    handout(mid, "r0", 0)
    h.add("nacks", receipts=["r0"], at_ms=DUE + 3, ok=nack_ok, error=None)
    for k in range(copies):
        handout(str(MessageId(HOUR, 1 + k)), f"r{k + 1}", 1)
        h.add("acks", receipts=[f"r{k + 1}"], at_ms=DUE + 1004, ok=True, error=None)
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


def test_a_nack_of_a_message_acked_on_another_hand_out_owes_no_copy():
    """Handed out twice (its lease lost with a master): acked on one, nacked on the other."""
    history, ready = _history(copies=0)
    again = {**history["consumed"][0], "receipt": "r-again", "at_ms": DUE + 500}
    history["consumed"].append(again)
    history["acks"].append({"receipts": ["r-again"], "at_ms": DUE + 501, "ok": True, "error": None})
    result = check(history, ready, {"n1": None})
    assert result["nacked_not_retried"] == 0 and violations(result) == []
