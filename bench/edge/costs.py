"""What a workload cost the processes running it: CPU time, and Horologe's GC pauses.

Clients run as threads of the bench process, so its CPU time is the clients' (plus the
harness's, the same for either system). Figures come from /proc and, for GC pauses, from
each node's public ``/metrics``; a server restarted during the workload cannot be read
that way, so such a workload gets the bench process's figure only.
"""

from __future__ import annotations

import time

from .procs import cpu_seconds

CLIENT_CPU = "CPU of the bench process (clients), s"
SERVER_CPU = "CPU of the server processes, s"
BUSIEST_CPU = "CPU of the busiest server process, s"
GC_LONG = "GC pauses over 10 ms, all nodes (count)"
GC_TIME = "GC pause time, all nodes, ms"


class Costs:
    def __init__(self, system) -> None:
        self._system = system

    def start(self) -> None:
        self._pids = self._system.server_pids()
        self._servers = {n: cpu_seconds(p) for n, p in self._pids.items()}
        self._gc = self._gc_pauses()
        self._mine = time.process_time()

    def figures(self) -> dict:
        out: dict = {CLIENT_CPU: time.process_time() - self._mine}
        if self._system.server_pids() != self._pids:
            return out
        spent = {n: cpu_seconds(p) - self._servers[n] for n, p in self._pids.items()}
        out[SERVER_CPU] = sum(spent.values())
        out[BUSIEST_CPU] = max(spent.values())
        if self._gc is not None:
            long_pauses, paused_s = (a - b for a, b in zip(self._gc_pauses(), self._gc, strict=True))
            out[GC_LONG] = long_pauses
            out[GC_TIME] = paused_s * 1000
        return out

    def _gc_pauses(self) -> tuple[int, float] | None:
        read = getattr(self._system, "gc_pauses", None)
        return read() if read is not None else None
