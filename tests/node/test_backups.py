"""A node's backups (node/backups.py) over a store, without a node around them."""

from __future__ import annotations

import asyncio

from horologe.cluster.backup.receive import receive
from horologe.cluster.leases import APPLIED_CLOCK
from horologe.cluster.raft.backup_point import take_point
from horologe.node.backups import Backups

from ..cluster.test_backup_files import _entry_at, _store

CLOCK = 1_767_225_600_000


def test_a_backup_is_taken_at_the_cluster_time_of_the_last_entry_it_holds(tmp_path):
    """Clients drop the ids they were given after a backup's time when a whole cluster is
    restored from it (docs/deploy.md): every id acknowledged before that time must be in
    it. The node's clock as the stream began is later than that by what the node had not
    yet applied at the point (a follower catching up: minutes), so ids acknowledged in
    between were kept by their clients and given to new messages after the restore."""
    store = _store(str(tmp_path / "store"))
    store.apply(8, lambda tx: tx.set_meta(APPLIED_CLOCK, CLOCK))  # the last entry the store applied

    async def take(name: str):
        return take_point(store, name, _entry_at, last_applied=9, term=8)

    async def run():
        backups = Backups("n2", take, wall_ms=lambda: CLOCK + 120_000, halted=lambda: None)
        async with backups.open() as (_point, chunks):
            return [chunk async for chunk in chunks]

    manifest = receive(asyncio.run(run()), str(tmp_path / "backup"))
    assert manifest.taken_at_ms == CLOCK
