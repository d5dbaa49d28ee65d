"""What the node's parts report to its metrics: one narrow callable each.

``create_app`` binds them to node/ops/metrics.py; alone (tests, tools) they do nothing.
Scalar observers take seconds; array observers take a numpy array of seconds, so a
batch of 100k messages is one call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def _ignore(_seconds) -> None:
    return None


@dataclass(frozen=True)
class Observers:
    apply_seconds: Callable[[float], None] = _ignore  # one Raft entry applied (tick thread)
    journal_fsync_seconds: Callable[[float], None] = _ignore  # one fsync of the Raft journal (tick thread)
    ready_lateness: Callable[[np.ndarray], None] = _ignore  # messages the wheel put in ready logs (loop)
    handout_lateness: Callable[[np.ndarray], None] = _ignore  # messages a pull leased (loop)


NO_OBSERVERS = Observers()
