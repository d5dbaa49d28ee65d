"""The thread rule of a node, and the one way across it.

Two threads run a node:

- **pysyncobj's tick thread owns the writer**: the :class:`~horologe.storage.Storage`
  and the :class:`~horologe.cluster.state_machine.StateMachine`. It applies every
  entry (fsyncs included), writes and installs snapshots. Nothing else writes the
  store, and nothing else reads the writer while the node runs.
- **The asyncio event loop owns everything else**: the
  :class:`~horologe.storage.store_reader.StoreReader` and the committed view built on
  it, the wheel, leases, group commits and HTTP handlers. It takes no lock the tick
  thread holds, so it never waits on an fsync.

Everything the tick thread tells the loop (an applied entry with the state it
committed, a proposal's outcome, a change of role, a transfer's result) goes through
:meth:`LoopCrossing.post`, which queues it on the loop in the order it was posted.

Enforced: :meth:`LoopCrossing.require_off_loop` is called where the writer is used
(``RaftNode.apply_entry``), and a ``StoreReader`` refuses to follow states on a second
thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any


class LoopCrossing:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        """Made on the loop's own thread."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop, after everything posted before; dropped once it closed."""
        if not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:  # closed between the check and the call
                pass

    def require_off_loop(self, what: str) -> None:
        if threading.get_ident() == self._loop_thread:
            raise RuntimeError(f"{what} runs on the tick thread, never on the event loop")
