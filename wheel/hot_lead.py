"""How far ahead the master fires a hot stretch: one batch a lead apart, done by its time.

The wheel fires what falls due within the fire lead, at most a batch per delivering
entry, back to back. When more than a batch falls due at once (a hot millisecond: a
hundred thousand reminders at the top of the hour), those batches take longer than the
lead to commit, and the last of them reached the ready log after its time. So the lead
stretches with what is pending before a message:

    the pending message of rank ``i`` (0: the next due) is fired ``lead`` ahead of its
    slot if ``i < batch``, else ``min(cap, step * (1 + i // batch))`` (at least ``lead``),

and, since the wheel fires in delivery order, so is everything due before it. The
batches of a hot millisecond are thereby fired ``step`` apart, the last one ``lead``
ahead of its time. In a steady flow (less than a batch within two leads) nothing changes;
the driver does not ask while a whole batch is due by the plain lead (a wheel far behind).
``lead`` is the driver's lead of the moment (half of ``step``, the fire lead, until
something is due within that half: node/wheel_driver.py).
Pure: the pending slots and the time come in as arguments.
"""

from __future__ import annotations

import numpy as np


def ranks_looked_at(step_ms: int, batch: int, cap_ms: int) -> int:
    """How many of the pending messages :func:`stretched_lead` needs: from this rank on,
    every message is fired the same lead ahead (the cap), so those after need no look
    (a wheel far behind, fast-forwarding, may have millions pending)."""
    return batch * max(2, -(-cap_ms // step_ms)) if step_ms > 0 else batch + 1


def stretched_lead(
    slots: np.ndarray, now_ms: int, lead_ms: int, step_ms: int, batch: int, cap_ms: int
) -> tuple[int, int | None]:
    """``slots``: the slots (ms) of the first pending messages in delivery order, those due
    by ``now_ms + max(cap_ms, lead_ms)`` at least, and at most :func:`ranks_looked_at` of
    them (past those every one has the capped lead: none would be fired or woken for
    before the last looked at). Returns (fire through this slot now, at
    least ``now_ms + lead_ms``; when the next of the rest beyond the first batch is to be
    fired, or None: the driver wakes for the first batch by the plain lead, and once a
    whole batch is fired, it looks again at once; it releases a batch an entry at most)."""
    if not len(slots):
        return now_ms + lead_ms, None
    rank = np.arange(len(slots))
    stretch = np.maximum(np.minimum(step_ms * (1 + rank // batch), cap_ms), lead_ms)
    ahead = np.where(rank < batch, lead_ms, stretch)
    fire_at = slots - ahead
    now = np.flatnonzero(fire_at <= now_ms)
    last = int(now[-1]) if len(now) else -1
    through = max(now_ms + lead_ms, int(slots[last])) if last >= 0 else now_ms + lead_ms
    rest = fire_at[max(last + 1, batch) :]  # the first batch's wake is the plain lead's
    return through, (int(rest.min()) if len(rest) else None)
