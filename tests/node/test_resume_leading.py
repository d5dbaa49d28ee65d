"""A release that failed leaves this node master: it runs again everything the master runs.
A role change during the release started nothing (it was releasing), so the wheel and push
alone, as before, left retention and recurring schedules stopped until the next election."""

from __future__ import annotations

from horologe.node.clock import system_clock
from horologe.node.config import NodeConfig
from horologe.node.service import NodeService


def test_a_release_that_failed_runs_again_what_the_master_runs(tmp_path):
    config = NodeConfig(node_id="n1", data_dir=str(tmp_path), http="127.0.0.1:1", raft="127.0.0.1:2")
    svc = NodeService(config, system_clock(0))
    try:
        started = []
        for task in svc._leading:
            task.start = lambda name=task.name: started.append(name)
        svc._resume_leading()
        assert sorted(started) == ["push", "retention", "schedules", "wheel"]
    finally:
        svc.view.close()
        svc._writer.store.close()
