"""A read on the event loop that meets damaged files halts this replica.

The store checks every frame it reads (storage/framing.py): committed bytes that fail
their checksum raise :class:`~horologe.storage.CorruptLogError` rather than hand out
what cannot be trusted. An apply that meets one halts the replica on the tick thread
(cluster/state_machine.py). The loop reads the same files for pulls, pushes, message
reads, pending lists, the dead-letter peek and the wheel; each such read would fail
again on every try while the node went on leading, so that consumers got errors for as
long as it led, though the other replicas hold sound copies.

So a damaged read on the loop halts the replica (``RaftNode.halt_damaged``; not when
a shipped snapshot replaced the store's files since the read began, which a read in
that moment may take for damage):
it hands leadership over and never campaigns, still stores and acknowledges entries in
its journal (which checks its own frames), and serves nothing but its status until it
is restarted; the node is then best replaced (docs/cluster.md, "Damaged files"). The
call that met the damage answers 503 ``store_damaged``, which says nothing was done:
clients go on to another node.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from horologe.storage import CorruptLogError

log = logging.getLogger(__name__)


class StoreDamage:
    """Loop thread only. ``halt(why, generation)`` halts this replica unless the store's
    files were replaced since ``generation`` (``RaftNode.halt_damaged``); ``generation()``
    is that of the state the loop reads at."""

    def __init__(self, halt: Callable[[str, int], None], generation: Callable[[], int]) -> None:
        self._halt = halt
        self._generation = generation
        self.found: str | None = None  # the last damage a read met

    def seen(self, e: BaseException) -> bool:
        """Whether ``e`` says this replica's files are damaged; if it is news, halt it."""
        if not isinstance(e, CorruptLogError):
            return False
        why = f"store damaged: {e}"
        if why != self.found:
            self.found = why
            log.critical("a read found this replica's store damaged: %s: halting this replica", e)
            self._halt(why, self._generation())
        return True
