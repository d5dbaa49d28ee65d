"""A monotonic clock that went back: the one fault of time a node does not ride out.

Every timeout of a node is a deadline on the monotonic clock: pysyncobj's election
deadline, heartbeats, leader fall-back and link timeouts, the event loop's timers, the
wheel's turns. Linux never steps that clock (NTP and ``date -s`` step the wall clock
only; a pause or a suspend only stops it for a while), but libfaketime, as the chaos
suite uses it, steps it with the wall clock. Stepped back an hour, every deadline taken
before lies an hour ahead: a master under load kept its followers from electing (its
appends reset their deadlines) while its wheel waited an hour for its next turn, and
nothing was delivered (tried: 70 s, term unchanged; with only the wall clock stepped,
the same master handed over in about a second).

No deadline taken before such a step can be trusted, so the process ends
(:data:`MONOTONIC_STEP_EXIT`) and a restart times everything from the clock as it is:
for the cluster, one election. A clock that jumps forward is a pause, which Raft rides
out as it does any other.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

MONOTONIC_STEP_EXIT = 71  # EX_OSERR of sysexits.h: the system's clock misbehaved
SLACK_S = 0.001  # a monotonic clock never goes back at all; this much is taken for noise


class MonotonicWatch:
    """Fed the monotonic clock's readings in order (one thread), says when it went back."""

    def __init__(self, now: float) -> None:
        self._latest = now

    def went_back(self, now: float) -> float | None:
        """How many seconds ``now`` lies behind the latest reading, if it does."""
        back = self._latest - now
        if back > SLACK_S:
            return back
        self._latest = now
        return None


def exit_for_step(back_s: float) -> None:
    log.critical(
        "this process's monotonic clock went back %.3f s: every timeout taken before lies that far "
        "ahead; exiting with status %d so that a restart times everything from the clock as it is",
        back_s,
        MONOTONIC_STEP_EXIT,
    )
    os._exit(MONOTONIC_STEP_EXIT)
