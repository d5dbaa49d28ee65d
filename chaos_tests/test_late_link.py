"""A release never hands the wheel to a node that a follower cannot hear (issue: releases
right after start reversed). One Raft link, n1 <-> n2, goes through proxies that are off
and come on late; n3 masters meanwhile."""

from __future__ import annotations

import time

import pytest

from horologe.client import HorologeError

from .harness import ChaosCluster

# Past pysyncobj's 3.5 s read timeout and inside its default 5 s connect retry: were the
# link left unread (followers exchange no Raft traffic), the new master's first message
# would drop it and the retry would come after n2 had started to campaign.
IDLE_S = 4.0


def _linked(c: ChaosCluster, i: int, j: int) -> bool:
    return next(p["connected"] for p in c.status(i)["peers"] if p["node_id"] == f"n{j + 1}")


def _release(c: ChaosCluster, frm: int, to: int) -> dict:
    return c.client(frm, retry_s=0).release_master(f"n{to + 1}")


def _until(what, timeout_s: float = 15.0) -> float:
    t0 = time.monotonic()
    while not what():
        assert time.monotonic() - t0 < timeout_s, f"timed out waiting for {what.__doc__}"
        time.sleep(0.05)
    return time.monotonic() - t0


def test_release_refuses_an_unheard_target_then_sticks_once_linked(toxiproxy, tmp_path):
    c = ChaosCluster(str(tmp_path), toxiproxy)
    late = [c.topology.raft[0, 1], c.topology.raft[1, 0]]
    try:
        c.start_all()
        master = c.wait_connected()
        if master != 2:
            _release(c, master, 2)
        assert c.wait_leader() == 2
        for proxy in late:
            proxy.disable()

        def cut():
            """n1 and n2 to see their link down"""
            return not _linked(c, 0, 1) and not _linked(c, 1, 0)

        _until(cut)
        term = c.status(2)["term"]
        with pytest.raises(HorologeError) as refused:
            _release(c, 2, 0)
        assert refused.value.status == 409 and "n1 has no link to n2" in str(refused.value)
        assert c.wait_leader() == 2 and c.status(2)["term"] == term

        for proxy in late:
            proxy.enable()

        def linked():
            """n1 and n2 to link up"""
            return _linked(c, 0, 1) and _linked(c, 1, 0)

        took = _until(linked)
        print(f"n1 <-> n2 linked {took:.2f} s after its proxies came on")
        time.sleep(IDLE_S)  # the point: the link must stay usable while idle (see IDLE_S)
        term = c.status(2)["term"]
        res = _release(c, 2, 0)
        assert res["new_master"] == "n1" and res["heard_by"] == ["n1", "n2", "n3"]
        term += 1  # one election: nobody campaigned against the new master
        end = time.monotonic() + 3.0  # beyond several election timeouts (0.3-0.6 s)
        while time.monotonic() < end:
            assert [(s["leader"], s["term"]) for s in map(c.status, c.indexes)] == [("n1", term)] * 3
            time.sleep(0.1)
    finally:
        c.stop_all()
        c.close()
        c.topology.destroy()
