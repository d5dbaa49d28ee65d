"""bench/edge/costs.py: CPU read from /proc for the servers and the bench process; none for
servers that were replaced meanwhile."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.edge.costs import BUSIEST_CPU, CLIENT_CPU, GC_LONG, SERVER_CPU, Costs
from bench.edge.procs import written_bytes


class _System:
    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids

    def server_pids(self) -> dict[str, int]:
        return dict(self.pids)


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_server_and_client_cpu_are_what_the_processes_spent():
    spin = (
        "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\ntime.sleep(30)"
    )
    busy = subprocess.Popen([sys.executable, "-c", spin])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        costs = Costs(_System({"busy": busy.pid, "idle": idle.pid}))
        costs.start()
        _burn(0.2)
        time.sleep(1.0)  # the busy one has spent its 0.3 s by now
        figures = costs.figures()
    finally:
        busy.kill()
        idle.kill()
    assert figures[CLIENT_CPU] >= 0.2
    assert 0.2 <= figures[SERVER_CPU] <= 0.6  # the busy one's 0.3 s (and the idle one's start)
    assert figures[BUSIEST_CPU] >= 0.2
    assert GC_LONG not in figures  # a system without gc_pauses (the Redis peer)


def test_replaced_servers_give_no_server_figure():
    system = _System({"n1": os.getpid()})
    costs = Costs(system)
    costs.start()
    system.pids = {"n1": os.getppid()}  # restarted: another process now
    figures = costs.figures()
    assert CLIENT_CPU in figures and SERVER_CPU not in figures


def test_written_bytes_counts_what_a_process_synced_to_storage(tmp_path):
    before = written_bytes(os.getpid())
    with open(tmp_path / "f", "wb") as f:
        f.write(b"x" * 256 * 1024)
        f.flush()
        os.fsync(f.fileno())
    assert written_bytes(os.getpid()) - before >= 256 * 1024
