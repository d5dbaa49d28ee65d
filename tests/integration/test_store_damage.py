"""A byte of a message's record flips in the master's store (bit rot, a bad sector) while
it is down: the node reads it back as master (node/store_damage.py). Real nodes, the SDK."""

from __future__ import annotations

import os
import time

import httpx

from horologe.client import Client
from testkit.process_cluster import CLIENT

from .load import wait_delivered

BODY = "y" * 64
COUNT = 20


def _flip_a_byte_of(folder: str, needle: bytes) -> str:
    """Flip one bit in the middle of the one place ``needle`` is stored under ``folder``."""
    found = []
    for dirpath, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                at = f.read().find(needle)
            if at >= 0:
                found.append((path, at + len(needle) // 2))
    assert len(found) == 1, found
    path, at = found[0]
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0x01]))
    return path


def test_a_damaged_record_on_the_master_halts_it_and_another_node_delivers_it(cluster):
    c = Client([cluster.url(i) for i in cluster.indexes], CLIENT, retry_s=20)
    now = int(time.time() * 1000)
    c.produce_batch([{"topic": "rot", "body": f"m{k:03d}-{BODY}", "deliver_at": now} for k in range(COUNT)])
    wait_delivered(cluster)
    damaged = cluster.wait_leader()
    cluster.catch_up(damaged)
    cluster.stop(damaged)
    _flip_a_byte_of(os.path.join(cluster.data_root, f"n{damaged + 1}", "store"), f"m007-{BODY}".encode())
    cluster.start(damaged)
    cluster.catch_up(damaged)
    cluster.make_master(damaged)

    got = []
    end = time.monotonic() + 20
    while len(got) < COUNT and time.monotonic() < end:
        batch = c.pull("rot", "g", max=5, wait_ms=500)  # retried on another node: store_damaged
        got += [m.body for m in batch]
        if batch:
            c.ack("rot", "g", batch.receipts())
    # Every message once, the damaged one as it was sent: another node's copy.
    assert sorted(got) == [f"m{k:03d}-{BODY}".encode() for k in range(COUNT)]
    st = cluster.status(damaged)
    assert st["halted"] and "checksum mismatch" in st["halted"], st["halted"]
    assert "horologe_halted 1.0" in httpx.get(f"{cluster.url(damaged)}/metrics").text  # for an alert
    assert st["role"] != "master"
    assert cluster.wait_leader(exclude=damaged) != damaged
    for _ in range(20):  # for 2 s, over several election timeouts: it must not campaign
        assert cluster.status(damaged)["role"] != "master"
        time.sleep(0.1)
    log = cluster.log(damaged)
    assert "a read found this replica's store damaged" in log and "Traceback" not in log


def test_a_node_whose_raft_journal_is_damaged_refuses_to_start_in_one_line(cluster):
    """A committed entry of a follower's Raft journal damaged while it is down: the node
    refuses to start, says which file and where in one line, and the others serve on."""
    c = Client([cluster.url(i) for i in cluster.indexes], CLIENT, retry_s=20)
    later = int(time.time() * 1000) + 3_600_000
    c.produce_batch([{"topic": "rot", "body": f"m{k:03d}-{BODY}", "deliver_at": later} for k in range(COUNT)])
    follower = next(i for i in cluster.indexes if i != cluster.wait_leader())
    cluster.catch_up(follower, behind=0)
    cluster.stop(follower)
    raft = os.path.join(cluster.data_root, f"n{follower + 1}", "raft")
    journal = _flip_a_byte_of(raft, f"m007-{BODY}".encode())
    cluster.start(follower)
    assert cluster.procs[follower].wait(30) == 1
    log = cluster.log(follower)
    refusal = [line for line in log.splitlines() if line.startswith("Error: refusing to start:")]
    assert len(refusal) == 1 and journal in refusal[0] and "replace this node" in refusal[0], log[-2000:]
    assert "Traceback" not in log
    c.produce("rot", "after", deliver_at=later)  # two of three serve on
