"""A master cut off from the others hands out nothing the new master may: the read lease
(cluster/raft/node.py; docs/cluster.md, "A deposed master stops at once").

Before it, pysyncobj kept a partitioned leader leading until ``leaderFallbackTimeout``
(2 s), and it answered pulls with messages the new master had meanwhile handed out and
seen acknowledged. Its Raft links are cut here by proxies; its HTTP port stays up.
"""

from __future__ import annotations

import time

from testkit.process_cluster import CLIENT

from .harness import ChaosCluster

DUE = 50


def test_a_master_cut_off_hands_out_nothing_once_another_leads(toxiproxy, tmp_path):
    c = ChaosCluster(str(tmp_path), toxiproxy)
    try:
        c.start_all()
        old = c.wait_connected()
        writer = c.client(old)
        writer.produce_batch([{"topic": "t", "body": f"m{k}", "deliver_after": "1ms"} for k in range(DUE)])
        c.catch_up(old, behind=0)
        time.sleep(0.3)  # due, and fired by the wheel: ready on every node
        c.topology.isolate(old)
        others = [i for i in c.indexes if i != old]
        deadline = time.monotonic() + 10
        new = None
        while new is None and time.monotonic() < deadline:
            new = next((i for i in others if c.status(i)["role"] == "master"), None)
        assert new is not None, "no other node took over"
        consumer = c.client(new)
        got: list = []
        while len(got) < DUE and time.monotonic() < deadline:
            got += consumer.pull("t", "g", max=DUE, wait_ms=200)
        assert len(got) == DUE
        consumer.ack("t", "g", [m.receipt for m in got])
        # Asked directly (no redirect followed), the old master hands none of them out again.
        pull = {"group": "g", "max": DUE}
        reply = c.http.post(f"{c.url(old)}/v1/topics/t/pull", pull, token=CLIENT)
        assert reply.status in (307, 503), reply
    finally:
        c.stop_all()
        c.close()
        c.topology.destroy()
