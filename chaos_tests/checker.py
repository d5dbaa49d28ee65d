"""The verdict on a chaos run: the history the clients recorded, against every node's ready log.

Checked, per scenario:

* **lost**: acknowledged, not cancelled (200), and never consumed; or nacked, never
  acked on another hand-out, and its retry copy never consumed (**nacked, not retried**);
* **extra retry copies**: one nack that made more than one copy;
* **ready duplicates**: a message twice in a node's ready log, and whether all nodes'
  ready logs are identical;
* **redeliveries**: a message handed to consumers again; *explained* unless an earlier
  hand-out of it had been acked (or nacked) successfully before the pull that got it again was
  sent (so: a lease lost with its master, an ack that failed, or one still in flight);
* **inside a lease**: a message handed out again while a lease of an earlier hand-out still
  held (its receipt's ``lease_until``, by the true clock less what clock faults allow),
  not acked, nacked or given back before the pull that got it again was sent: leases are
  replicated, so no failover may cause one;
* **early**: delivered before its deliver time by the clock of the master that fired it
  (``delivered_at_ms`` in the ready log; a message the master fired ahead by its lead is
  recorded at its deliver time, so this is a check of the apply, and the hand-out is
  checked at the consumers). By the true clock, as consumers received them, a master whose
  clock runs ``s`` ahead hands out up to ``s`` early: that is ``early_true`` and its
  allowance (in the soak, only within clock faults' windows);
* **cancelled but delivered**: a cancel answered 200 whose message is in a ready log;
* **rescheduled at an old time**: a rescheduled message handed out, or in a ready log, at
  a deliver time other than the one it was last moved to (:func:`final_times`: a move whose
  outcome is unknown leaves either time possible). Such a message is found in the ready
  logs under the id it answers to (``answers_to``), so one that fired at its old place and
  at its new one is also a duplicate; one never received is lost; and how early it was
  seen is measured from the time it was moved to;
* **lateness** p50/p99/max: ``delivered_at - max(deliver_at, sent)``, by the master's
  clock (the ready log), and as consumers saw it by the true clock;
* **time to recover**: the longest stretch without an acknowledged produce, from the
  first fault to the end of the load, and when it began.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from horologe.storage import ready_ids

from .history import nacked_not_retried


def percentiles(values) -> dict:
    a = np.asarray(list(values), dtype=float)
    if a.size == 0:
        return {"n": 0, "p50": None, "p99": None, "max": None}
    return {
        "n": int(a.size),
        "p50": float(np.percentile(a, 50)),
        "p99": float(np.percentile(a, 99)),
        "max": float(a.max()),
    }


UNKNOWN_IF_RESENT = ("delivered", "cancelled", "not_found")


def final_times(history: dict) -> dict[str, set[int]]:
    """For each message a reschedule asked to move: the deliver times it may end at.

    Its moves are taken in the order they were sent (one client, one call at a time). A
    move answered 200 leaves only its new time. One with no answer (``error``) may or may
    not have been made: it adds its new time to those possible. So does a 409 or 404 to a
    call the SDK sent more than once (``resent``: after no answer, a 503 or a redirect): an
    earlier send may have moved it, and it may have fired at its new time since. Any other
    answer leaves the times as they were.
    """
    produced = {p["id"]: p["deliver_at"] for p in history["produced"]}
    out: dict[str, set[int]] = {}
    for r in sorted(history.get("reschedules", []), key=lambda r: r["sent_ms"]):
        if r["id"] not in produced:
            continue
        times = out.setdefault(r["id"], {produced[r["id"]]})
        if r["outcome"] == "ok":
            out[r["id"]] = {r["new_at"]}
        elif r["outcome"].startswith("error") or (r["resent"] and r["outcome"] in UNKNOWN_IF_RESENT):
            times.add(r["new_at"])
    return out


def check(
    history: dict,
    ready: dict[str, np.ndarray],
    store_errors: dict[str, str | None],
    early_allowance_ms: int = 0,
    allowance_windows: list[tuple[int, int]] | None = None,
    answers_to: dict[str, str] | None = None,
) -> dict:
    """``allowance_windows`` (true ms): where given, a message first seen outside all of
    them is allowed no earliness by the true clock; the allowance holds inside them.
    ``answers_to``: the id a ready-log row's place answers to, where it differs (a
    rescheduled message lives as a copy under another place; Storage.original_ids)."""
    produced = {p["id"]: p for p in history["produced"]}
    cancelled_ok = {c["id"] for c in history["cancels"] if c["outcome"] == "ok"}
    consumed = history["consumed"]
    consumed_ids = {c["id"] for c in consumed}
    finals = final_times(history)
    answers_to = answers_to or {}

    # Ready logs (one per node, never none): duplicates, agreement, early by the master's clock.
    per_node = {}
    for node, node_rows in ready.items():
        node_ids = [answers_to.get(i, i) for i in ready_ids(node_rows)]
        per_node[node] = {
            "delivered": len(node_ids),
            "duplicates": sum(n - 1 for n in Counter(node_ids).values() if n > 1),
            "early": int((node_rows["delivered_at_ms"] < node_rows["deliver_at_ms"]).sum()),
            "store_check": store_errors.get(node),
        }
    rows = next(iter(ready.values()))
    identical = all(np.array_equal(r, rows) for r in ready.values())
    ids = [answers_to.get(i, i) for i in ready_ids(rows)]
    delivered_at = dict(zip(ids, rows["delivered_at_ms"].tolist(), strict=True))
    fired_for = dict(zip(ids, rows["deliver_at_ms"].tolist(), strict=True))

    # Rescheduled messages: handed out, or fired, only at a time they may have been moved to.
    handed = [(c["id"], c["deliver_at"]) for c in consumed]
    fired = list(zip(ids, rows["deliver_at_ms"].tolist(), strict=True))
    at_old_time = sorted({m for m, at in handed + fired if m in finals and at not in finals[m]})

    owed = set(produced) - cancelled_ok
    lost = sorted(owed - consumed_ids)
    unretried = sorted(nacked_not_retried(consumed, history.get("nacks", []), history["acks"]))
    copies = Counter(key for key, _ in {(c["key"], c["id"]) for c in consumed if c["attempt"] > 0})
    not_in_ready = sorted(owed - set(ids))
    cancelled_delivered = sorted(cancelled_ok & (set(ids) | consumed_ids))

    # Redeliveries, and whether each is explained by an earlier hand-out that was not acked
    # (nor nacked: a nacked message comes back as a copy under a new id, never as itself).
    settled = [*history["acks"], *history.get("nacks", [])]
    acked_at = {r: a["at_ms"] for a in settled if a["ok"] for r in a["receipts"]}
    seen: dict[str, list[dict]] = {}
    redeliveries = unexplained = 0
    unexplained_ids = []
    inside_lease_ids = []
    for c in sorted(consumed, key=lambda c: c["at_ms"]):
        earlier = seen.setdefault(c["id"], [])
        if earlier:
            redeliveries += 1
            if any(acked_at.get(e["receipt"], c["sent_ms"]) < c["sent_ms"] for e in earlier):
                unexplained += 1
                unexplained_ids.append(c["id"])
            # Handed out again while an earlier hand-out's lease still held (by the true
            # clock, less what clock faults allow): a lease lost, whatever the reason.
            skew = _allowance(c["at_ms"], early_allowance_ms, allowance_windows)
            if any(
                e["receipt"] != c["receipt"]
                and lease_end(e["receipt"]) > c["at_ms"] + skew
                and acked_at.get(e["receipt"], c["sent_ms"]) >= c["sent_ms"]
                for e in earlier
            ):
                inside_lease_ids.append(c["id"])
        earlier.append(c)

    # Lateness: from when the message could first be delivered (a rescheduled one: from the
    # time it fired for, when that is one it may have been moved to).
    def deliver_time(mid: str, seen_at: int | None) -> int:
        if mid not in finals:
            return produced[mid]["deliver_at"]
        return seen_at if seen_at in finals[mid] else min(finals[mid])

    due = {mid: max(deliver_time(mid, fired_for.get(mid)), p["sent_ms"]) for mid, p in produced.items()}
    timeline = sorted((due[m], delivered_at[m] - due[m]) for m in due if m in delivered_at)
    late_master = [late for _, late in timeline]
    first_seen: dict[str, dict] = {}
    for c in consumed:
        if c["id"] not in first_seen or c["at_ms"] < first_seen[c["id"]]["at_ms"]:
            first_seen[c["id"]] = c
    late_true = [first_seen[m]["at_ms"] - due[m] for m in due if m in first_seen]
    early_at = [
        (deliver_time(m, c["deliver_at"]) - c["at_ms"], c["at_ms"])
        for m, c in first_seen.items()
        if m in produced
    ]
    early_true = max((early for early, _ in early_at), default=0)
    beyond = sum(
        1
        for early, t in early_at
        if early > 0 and early > _allowance(t, early_allowance_ms, allowance_windows)
    )
    recover = time_to_recover(history)

    return {
        "acknowledged": len(produced),
        "produce_failures": sum(f["count"] for f in history["produce_failures"]),
        "cancels": dict(Counter(c["outcome"].split(":")[0] for c in history["cancels"])),
        "consumed": len(consumed),
        "lost": len(lost),
        "lost_ids": lost[:20],
        "nacked": sum(len(n["receipts"]) for n in history.get("nacks", []) if n["ok"]),
        "nacked_not_retried": len(unretried),
        "nacked_not_retried_ids": unretried[:20],
        "extra_retry_copies": sum(n - 1 for n in copies.values()),
        "not_in_ready_log": len(not_in_ready),
        "duplicates": sum(n["duplicates"] for n in per_node.values()),
        "ready_logs_identical": identical,
        "redeliveries": redeliveries,
        "redeliveries_unexplained": unexplained,
        "unexplained_ids": unexplained_ids[:20],
        "inside_lease": len(inside_lease_ids),
        "inside_lease_ids": inside_lease_ids[:20],
        "early": sum(n["early"] for n in per_node.values()),
        "early_true_max_ms": max(0, early_true),
        "early_true_allowance_ms": early_allowance_ms,
        "early_true_beyond_allowance": beyond,
        "cancelled_but_delivered": len(cancelled_delivered),
        "reschedules": dict(Counter(r["outcome"].split(":")[0] for r in history.get("reschedules", []))),
        "rescheduled": len(finals),
        "rescheduled_at_old_time": len(at_old_time),
        "rescheduled_at_old_time_ids": at_old_time[:20],
        "lateness_ms": percentiles(late_master),
        "consumer_lateness_ms": percentiles(late_true),
        "time_to_recover_ms": recover and recover[0],
        "time_to_recover_from_ms": recover and recover[1],
        "nodes": per_node,
        "timeline": timeline,  # (due ms, lateness ms by the master's clock), for the plot
    }


def lease_end(receipt: str) -> int:
    """When the lease a receipt names ends, by its master's clock (epoch ms): the field
    after the span in ``[o@]span.lease_until.mac.topic`` (node/consumers/receipts.py);
    0 for a string of another form (the checker's own tests name receipts ``r0``)."""
    parts = receipt.split(".", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else 0


def _allowance(t: int, allowance_ms: int, windows: list[tuple[int, int]] | None) -> int:
    if windows is None or any(lo <= t <= hi for lo, hi in windows):
        return allowance_ms
    return 0


def time_to_recover(history: dict) -> tuple[int, int] | None:
    """The longest gap between acknowledged produces from the first fault's start on:
    (its length, when it began), ms by the true clock."""
    if not history["faults"]:
        return None
    start = min(f["start_ms"] for f in history["faults"])
    acks = sorted({p["acked_ms"] for p in history["produced"] if p["acked_ms"] >= start})
    if not acks:
        return None
    points = [start, *acks]
    return max((int(b - a), a) for a, b in zip(points, points[1:], strict=False))


def violations(result: dict) -> list[str]:
    """What makes a run fail; empty when it passes."""
    out = []
    for key in (
        "lost",
        "nacked_not_retried",
        "extra_retry_copies",
        "duplicates",
        "redeliveries_unexplained",
        "inside_lease",
        "early",
        "cancelled_but_delivered",
        "rescheduled_at_old_time",
    ):
        if result[key]:
            out.append(f"{key} = {result[key]}")
    if not result["ready_logs_identical"]:
        out.append("ready logs differ between nodes")
    if result["early_true_beyond_allowance"]:
        out.append(
            f"early by the true clock beyond the allowance: {result['early_true_beyond_allowance']} "
            f"messages, up to {result['early_true_max_ms']} ms"
        )
    for node, n in result["nodes"].items():
        if n["store_check"]:
            out.append(f"{node} store check: {n['store_check']}")
    return out
