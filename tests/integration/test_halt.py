"""A replica that cannot apply (its disk is full) halts: it hands the master's place over,
never campaigns, takes no snapshot, and once it has room again a restart replays what
it missed. Its store sits on a small tmpfs (we are root in the test environment)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from horologe.client import HorologeError
from horologe.storage import check_store

DAY_MS = 86_400_000
BODY = "x" * 32_000


def _small_disk_cluster(make_cluster, mount_tmpfs, i: int, extra_toml: str = ""):
    """A cluster (not started) whose node i keeps its store on a 3 MB tmpfs; and that store."""
    cluster = make_cluster(start=False, extra_toml=extra_toml)
    store = os.path.join(cluster.data_root, f"n{i + 1}", "store")
    os.makedirs(store)
    mount_tmpfs(store, "3m")
    return cluster, store


def _room_again_and_caught_up(cluster, i: int, store: str, stored: int) -> None:
    """Node i, halted on a full disk, gets room and a restart: it replays what it missed,
    ends with the others' counters, and every store checks out."""
    cluster.stop(i)
    subprocess.run(["mount", "-o", "remount,size=256m", store], check=True)
    cluster.start(i)
    cluster.catch_up(i)
    counters = [cluster.status(n)["counters"] for n in cluster.indexes]
    assert counters[0] == counters[1] == counters[2] and counters[0]["stored"] >= stored
    assert cluster.status(i)["halted"] is None
    cluster.stop_all()
    for n in cluster.indexes:
        with cluster.store(n) as s:
            check_store(s)


@pytest.mark.root
def test_a_full_disk_halts_the_master_which_steps_down_then_replays(make_cluster, mount_tmpfs):
    cluster, store = _small_disk_cluster(make_cluster, mount_tmpfs, 0, "log_compaction_min_entries = 40")
    try:
        cluster.start_all()
        cluster.make_master(0)
        far = int(time.time() * 1000) + 2 * DAY_MS
        for k in range(200):  # 32 KB x 10 a request: the 3 MB fill up within ~10 requests
            batch = [{"topic": "full", "body": BODY, "deliver_at": far + k} for _ in range(10)]
            try:
                cluster.produce(0, batch)
            except HorologeError:
                break
        st = cluster.status(0)
        assert st["halted"] and "StorageFullError" in st["halted"], st["halted"]
        master = cluster.wait_leader(exclude=0)  # it stepped down by itself
        snapshot = os.path.join(cluster.data_root, "n1", "raft", "snapshot")
        snapshot_mtime = os.path.getmtime(snapshot) if os.path.exists(snapshot) else None

        for k in range(60):  # past the compaction threshold on the other nodes
            cluster.produce(master, [{"topic": "later", "body": f"{k}", "deliver_at": far + k}])
        for _ in range(20):  # for 2 s, over several election timeouts: it must not campaign
            st = cluster.status(0)
            assert st["role"] != "master" and st["halted"]
            time.sleep(0.1)
        if snapshot_mtime is not None:
            assert os.path.getmtime(snapshot) == snapshot_mtime, "a halted node wrote a snapshot"
        else:
            assert not os.path.exists(snapshot), "a halted node wrote a snapshot"

        _room_again_and_caught_up(cluster, 0, store, stored=60)
    finally:
        cluster.stop_all()  # before the fixture unmounts the store under it


@pytest.mark.root
def test_a_follower_whose_disk_fills_halts_alone_and_catches_up_once_it_has_room(make_cluster, mount_tmpfs):
    cluster, store = _small_disk_cluster(make_cluster, mount_tmpfs, 2)
    try:
        cluster.start_all()
        cluster.make_master(0)
        master = 0
        far = int(time.time() * 1000) + 2 * DAY_MS
        acked = 0
        for k in range(30):  # 320 KB a request: n3's 3 MB fill up within ~10; the rest go on
            batch = [{"topic": "full", "body": BODY, "deliver_at": far + k} for _ in range(10)]
            acked += sum(1 for r in cluster.produce(master, batch) if "id" in r)
        assert acked == 300  # the master and n2 are a majority: every request was served
        st = cluster.status(2)
        assert st["halted"] and "StorageFullError" in st["halted"], st["halted"]
        assert cluster.wait_leader() == master  # a follower's halt moves nothing

        _room_again_and_caught_up(cluster, 2, store, stored=300)
    finally:
        cluster.stop_all()  # before the fixture unmounts the store under it
