"""The soak runs every kind of fault on one cluster, so a fault that removes nodes for good
must leave the nodes whose clocks later faults step (``FOLLOWER``, ``SKEWED``): a soak
whose ``shrink_while_down`` removed n1 then failed ``clock_step_dead_follower`` on it
(ProcessLookupError: the process was gone)."""

from __future__ import annotations

import random
from contextlib import contextmanager

from .scenarios import FOLLOWER, SKEWED, Run, shrink_while_down


class _Cluster:
    """Nodes as indexes only: what a scenario does to them is recorded, not done."""

    def __init__(self, leader: int) -> None:
        self.indexes = [0, 1, 2]
        self.leader = leader
        self.gone: set[int] = set()

    def wait_leader(self, among=None, **_kw) -> int:
        return self.leader

    def wait_connected(self, **_kw) -> int:
        return self.leader

    def alive(self) -> list[int]:
        return [i for i in self.indexes if i not in self.gone]

    def signal(self, i: int, _sig) -> None:
        self.gone.add(i)

    def stop(self, i: int) -> None:
        self.gone.add(i)


class _Run(Run):
    def add_node(self) -> int:
        self.cluster.indexes.append(len(self.cluster.indexes))
        return self.cluster.indexes[-1]

    def remove_node(self, i: int) -> None:
        self.retired.add(i)

    @contextmanager
    def fault(self, name: str):
        yield


def test_shrink_while_down_removes_no_node_whose_clock_is_stepped():
    for seed in range(50):
        for leader in range(3):
            run = _Run(_Cluster(leader), workload=None, history=None, rng=random.Random(seed))
            shrink_while_down(run)
            assert len(run.retired) == 2
            assert not run.retired & {FOLLOWER, SKEWED}, (seed, leader, run.retired)
