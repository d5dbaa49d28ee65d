"""A master that never had a majority's clock readings proposes nothing stamped by its own
clock: an entry's clock is the cluster's time (the gap before a term's first entry moves
every running lease on: cluster/leases.py), and one node's clock may be far off."""

from __future__ import annotations

import asyncio

import pytest

from horologe.cluster import SYNC, NotMasterError
from horologe.cluster.entries import decode
from horologe.node.clock import system_clock
from horologe.node.config import NodeConfig
from horologe.node.service import NodeService

HOUR_MS = 3_600_000


class Proposals:
    """What the service hands Raft, as RaftNode.submit takes it."""

    def __init__(self) -> None:
        self.blobs: list[bytes] = []

    def submit(self, blob: bytes):
        self.blobs.append(blob)
        return asyncio.get_running_loop().create_future()


@pytest.fixture
def service(tmp_path):
    config = NodeConfig(node_id="n1", data_dir=str(tmp_path), http="127.0.0.1:1", raft="127.0.0.1:2")
    svc = NodeService(config, system_clock(HOUR_MS))  # this node's clock: an hour ahead
    svc.raft = Proposals()
    yield svc
    svc.view.close()
    svc._writer.store.close()


def test_an_entry_is_not_stamped_by_a_clock_no_majority_vouched_for(service, monkeypatch):
    monkeypatch.setattr(service.quorum_clock, "known", lambda: False)

    async def run() -> None:
        with pytest.raises(NotMasterError):
            service.submit(SYNC)

    asyncio.run(run())
    assert service.raft.blobs == []


def test_once_the_quorum_time_is_known_entries_carry_it(service, monkeypatch):
    monkeypatch.setattr(service.quorum_clock, "known", lambda: True)
    monkeypatch.setattr(service, "clock", lambda: 1_767_225_600_000)

    async def run() -> None:
        service.submit(SYNC).close()  # proposed: its answer is not waited for here

    asyncio.run(run())
    (blob,) = service.raft.blobs
    assert decode(blob).clock_ms == 1_767_225_600_000
