"""A graceful stop finishes whatever signals follow the first: the store is closed at a
sync point, so the next start replays nothing (storage/commit_journal.py)."""

from __future__ import annotations

import os
import signal
import time

from horologe.storage import Storage


def test_a_second_sigterm_does_not_cut_a_graceful_stop_short(cluster):
    master = cluster.wait_connected()
    far = int(time.time() * 1000) + 86_400_000
    cluster.produce(master, [{"topic": "t", "body": f"{k}", "deliver_at": far + k} for k in range(50)])
    p = cluster.procs[master]
    p.send_signal(signal.SIGTERM)
    time.sleep(0.005)  # inside the stop: the master hands over first (tens of ms)
    p.send_signal(signal.SIGTERM)
    assert p.wait(20) == 0, "the master did not stop cleanly"
    log = cluster.log(master)
    assert "already stopping (SIGTERM ignored)" in log and "released mastership on shutdown" in log
    # Writable, as the node opens it: nothing to go back over, nothing to replay.
    with Storage(os.path.join(cluster.data_root, f"n{master + 1}", "store")) as s:
        assert s.recovered == [] and s.applied_index > 0
