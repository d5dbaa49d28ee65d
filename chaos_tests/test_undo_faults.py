"""A fault that goes wrong midway in the soak is undone before the next (a SIGSTOP whose
wait for a new master timed out left the old master stopped for the rest of a run)."""

from __future__ import annotations

import random
import signal

from .harness import ChaosCluster
from .history import History
from .scenarios import Run


def test_undo_faults_continues_a_stopped_node_heals_links_and_restarts_a_member(toxiproxy, tmp_path):
    c = ChaosCluster(str(tmp_path), toxiproxy)
    run = Run(c, workload=None, history=History(seed=0), rng=random.Random(0))
    try:
        c.start_all()
        c.wait_connected()
        c.signal(0, signal.SIGSTOP)
        c.topology.isolate(1)
        c.signal(2, signal.SIGKILL)
        run.undo_faults()
        assert c.wait_connected() in (0, 1, 2)
        assert all(p["connected"] for p in c.status(1)["peers"])
        assert sorted(c.alive()) == [0, 1, 2]
    finally:
        c.stop_all()
        c.close()
        c.topology.destroy()
