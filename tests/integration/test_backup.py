"""Backup of a running node and restore from it, through the command line (cluster/backup/).

One cluster is backed up from a follower while it serves; the backup is restored into a
new cluster (new ports, new folders), and into one node of the first cluster after its
disk is lost. What was committed at the backup's index is all the new cluster holds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

from horologe.client import NotFoundError
from horologe.cluster.backup.manifest import check
from horologe.cluster.raft.membership import JOIN_FRESH_DUMP_ENTRIES
from horologe.storage import check_store
from testkit.process_cluster import ADMIN, ENV, free_ports

HOUR_MS = 3_600_000


def _horologe(*args: str) -> subprocess.CompletedProcess:
    cli = [sys.executable, "-m", "horologe", *args]
    return subprocess.run(cli, capture_output=True, text=True, timeout=120, env={**os.environ, **ENV})


def _state(client, message_id: str) -> str:
    try:
        return client.status(message_id).state
    except NotFoundError:
        return "not found"


def _follower(cluster) -> int:
    master = cluster.wait_connected()
    return next(i for i in cluster.indexes if i != master)


def _fill(client) -> dict:
    """Messages pending over several hours, delivered ones half acked, one cancelled."""
    now = int(time.time() * 1000)
    pending = [
        client.produce("orders", f"p{k}", deliver_at=now + (1 + k % 4) * HOUR_MS + k, key=f"k{k}").id
        for k in range(20)
    ]
    client.cancel(pending[0])
    due = [client.produce("orders", f"d{k}", deliver_at=now - 1_000 + k).id for k in range(10)]
    deadline = time.monotonic() + 20
    while not all(_state(client, m) == "delivered" for m in due):
        assert time.monotonic() < deadline, "the due messages were not delivered"
        time.sleep(0.2)
    acked, got = [], {}
    while len(got) < 10:
        batch = client.pull("orders", "billing", max=10, wait_ms=2_000, visibility_ms=1_000)
        got.update((m.id, m) for m in batch)
    acked = sorted(got)[:5]
    client.ack("orders", "billing", [got[m].receipt for m in acked])
    return {"pending": pending, "due": due, "acked": acked, "now": now}


def test_a_backup_restores_a_new_cluster_holding_what_was_committed_at_its_index(make_cluster, tmp_path):
    old = make_cluster()
    client = old.client(0)
    made = _fill(client)
    backup = str(tmp_path / "backup")

    done = _horologe("backup", "--url", old.url(_follower(old)), "--admin-token", ADMIN, "--to", backup)
    assert done.returncode == 0, done.stderr
    assert "backed up node n" in done.stdout
    after = [client.produce("orders", f"late{k}", deliver_after=2 * HOUR_MS).id for k in range(5)]
    refused = _horologe("backup", "--url", old.url(0), "--admin-token", ADMIN, "--to", backup)
    assert refused.returncode != 0 and "exists" in refused.stderr
    forecast = client.forecast("orders", "1h", start=made["now"], end=made["now"] + 6 * HOUR_MS)

    new = make_cluster(start=False)
    for i in new.indexes:
        done = _horologe("restore", backup, os.path.join(new.data_root, f"n{i + 1}"))
        assert done.returncode == 0, done.stderr
        assert "taken at 20" in done.stdout and "clients must drop those" in done.stdout, done.stdout
    new.start_all()
    fresh = new.client(0)
    # A restored node starts at the backup's term: its log's entries are of that term, and
    # a leader of a lower one would lose every comparison of last terms to them.
    taken_at = check(backup).raft
    assert new.status(new.wait_connected())["term"] > taken_at.term >= taken_at.entries[1][1]

    assert {_state(fresh, m) for m in made["pending"][1:]} == {"scheduled"}
    assert _state(fresh, made["pending"][0]) == "cancelled"
    assert {_state(fresh, m) for m in made["due"]} == {"delivered"}
    assert {_state(fresh, m) for m in after} == {"not found"}  # produced after the backup's index
    for m in made["pending"][1:3]:
        assert fresh.status(m).deliver_at == client.status(m).deliver_at
    # The forecast the old cluster gave, less what was produced after the backup.
    again = fresh.forecast("orders", "1h", start=made["now"], end=made["now"] + 6 * HOUR_MS)
    assert sum(n for _t, n in again.buckets) == sum(n for _t, n in forecast.buckets) - len(after)
    # A producer key from before the backup still dedupes.
    p1 = made["pending"][1]
    assert fresh.produce("orders", "p1", deliver_after=HOUR_MS, key="k1").id == p1
    # The group's acks held: the five not acked come again once their leases are over.
    time.sleep(1.2)
    seen: set[str] = set()
    deadline = time.monotonic() + 20
    while len(seen) < 5 and time.monotonic() < deadline:
        batch = fresh.pull("orders", "billing", max=10, wait_ms=1_000)
        seen.update(m.id for m in batch)
        fresh.ack("orders", "billing", [m.receipt for m in batch])
    assert seen == set(made["due"]) - set(made["acked"])
    # The new cluster commits and delivers.
    now_id = fresh.produce("orders", "new", deliver_after=0).id
    deadline = time.monotonic() + 20
    while _state(fresh, now_id) != "delivered":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    check(backup)  # left as it was
    new.stop_all()
    for i in new.indexes:
        with new.store(i) as s:
            check_store(s)


def test_a_node_whose_disk_was_lost_restores_from_a_backup_and_catches_up(make_cluster, tmp_path):
    """Restored from a backup a few entries old, the node is fed the log from the backup's
    index: the master, which never took a dump here, writes none to ship it (as it would
    for an empty node, its log being past ``JOIN_FRESH_DUMP_ENTRIES``)."""
    cluster = make_cluster()
    client = cluster.client(0)
    made = _fill(client)
    while cluster.status(cluster.wait_leader())["commit_index"] <= JOIN_FRESH_DUMP_ENTRIES:
        for n in range(100):  # an entry each
            client.produce("filler", f"f{n}", deliver_after="1d")
    backup = str(tmp_path / "backup")
    lost = _follower(cluster)
    assert (
        _horologe("backup", "--url", cluster.url(lost), "--admin-token", ADMIN, "--to", backup).returncode
        == 0
    )
    after = [client.produce("orders", f"late{k}", deliver_after=HOUR_MS).id for k in range(5)]

    cluster.stop(lost)
    # Its vote and term went with its disk: it comes back as a new member (docs/deploy.md,
    # "Replace one node's lost disk"), taken out first, then added with the backup's data.
    via, name = cluster.url(cluster.wait_leader()), f"n{lost + 1}"
    removed = _horologe("cluster", "remove", name, "--url", via)
    assert removed.returncode == 0, removed.stderr
    data = os.path.join(cluster.data_root, name)
    refused = _horologe("restore", backup, data)
    assert refused.returncode != 0 and "already holds a node's data" in refused.stderr
    shutil.rmtree(data)
    assert _horologe("restore", backup, data).returncode == 0
    with open(cluster.configs[lost]) as f:
        config = f.read()
    with open(cluster.configs[lost], "w") as f:
        f.write("join = true\n" + config)  # before the [peers.*] tables
    cluster.start(lost)
    cluster.wait_serving(lost)
    added = _horologe(
        "cluster", "add", name,
        "--raft", f"127.0.0.1:{cluster.raft_ports[lost]}",
        "--http", f"127.0.0.1:{cluster.http_ports[lost]}",
        "--url", via,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "installing snapshot" not in cluster.log(lost)
    assert "a dump first" not in cluster.log(cluster.wait_leader())
    # The master keeps committing its wheel's syncs, so no two nodes stop at one index: the
    # restored node is held to everything the master had applied once it was back.
    applied = cluster.status(cluster.wait_leader())["applied_index"]
    cluster.catch_up(lost, behind=0)
    counters = [cluster.status(n)["counters"] for n in cluster.indexes]
    assert counters[lost] == counters[(lost + 1) % 3]
    assert {_state(client, m) for m in [*made["pending"][1:], *after]} == {"scheduled"}
    cluster.stop_all()
    with cluster.store(lost) as restored:
        assert restored.applied_index >= applied
        check_store(restored)


def test_restore_refuses_a_corrupt_backup_and_writes_nothing(make_cluster, tmp_path):
    cluster = make_cluster()
    cluster.client(0).produce("orders", "x", deliver_after=HOUR_MS)
    backup = str(tmp_path / "backup")
    down = f"http://127.0.0.1:{free_ports(1)[0]}"  # nothing answers there: the next is asked
    taken = _horologe("backup", "--url", f"{down},{cluster.url(0)}", "--admin-token", ADMIN, "--to", backup)
    assert taken.returncode == 0, taken.stderr
    assert (
        f"backup from {down} failed: ConnectError" in taken.stderr and "trying the next node" in taken.stderr
    )
    assert f"from {cluster.url(0)} into {backup}" in taken.stdout
    delay = os.path.join(backup, "store", "delay")
    victim = os.path.join(delay, sorted(n for n in os.listdir(delay) if n.endswith(".log"))[0])
    with open(victim, "r+b") as f:
        f.seek(-5, os.SEEK_END)
        byte = f.read(1)
        f.seek(-5, os.SEEK_END)
        f.write(bytes([byte[0] ^ 1]))
    target = str(tmp_path / "data")
    done = _horologe("restore", backup, target)
    assert done.returncode == 1
    assert "SHA-256" in done.stderr and victim in done.stderr
    assert not os.path.exists(os.path.join(target, "store")) and not os.path.exists(
        os.path.join(target, "raft", "snapshot")
    )
    bad_token = _horologe(
        "backup", "--url", cluster.url(0), "--admin-token", "nope", "--to", str(tmp_path / "b2")
    )
    assert bad_token.returncode == 1 and "refused the backup: 403" in bad_token.stderr
    assert not os.path.exists(str(tmp_path / "b2")) and not os.path.exists(str(tmp_path / "b2.part"))


def test_a_node_that_cannot_be_current_is_backed_up_only_when_asked_to(make_cluster, tmp_path):
    """A node cut off from the others (its peers stopped) sent its copy as any other: a
    backup that could miss what the cluster committed since, with nothing to say so."""
    cluster = make_cluster()
    cluster.client(0).produce("orders", "x", deliver_after=HOUR_MS)
    for query, code in (("allow_stale=0", "invalid_field"), ("stale=true", "unknown_field")):
        r = cluster.to_master("GET", f"/admin/backup?{query}", token=ADMIN)
        assert (r.status, r.body["error"]["code"]) == (400, code), r.body
    alone = _follower(cluster)
    for i in cluster.indexes:
        if i != alone:
            cluster.stop(i)
    backup = str(tmp_path / "backup")
    args = ("backup", "--url", cluster.url(alone), "--admin-token", ADMIN, "--to", backup)
    deadline = time.monotonic() + 20
    # until it no longer hears a master (asked once: not again while --retry-for lasts)
    while (refused := _horologe("--retry-for", "0", *args)).returncode == 0:
        shutil.rmtree(backup)
        assert time.monotonic() < deadline, "a node without its peers was still backed up"
        time.sleep(0.5)
    assert "409 not_current" in refused.stderr and "--allow-stale" in refused.stderr, refused.stderr
    assert not os.path.exists(backup)
    taken = _horologe(*args, "--allow-stale")
    assert taken.returncode == 0, taken.stderr
    check(backup)


def test_a_backup_asked_of_a_node_that_is_down_waits_for_it_within_retry_for(make_cluster, tmp_path):
    """A node restarting (a rolling upgrade) as the nightly backup ran: the command tried
    each node once and gave up, --retry-for unheard, and a node whose address dropped the
    connection held it a minute before the next was tried."""
    cluster = make_cluster()
    cluster.client(0).produce("orders", "x", deliver_after=HOUR_MS)
    node = _follower(cluster)
    cluster.stop(node)
    backup = str(tmp_path / "backup")
    cli = [sys.executable, "-m", "horologe", "--retry-for", "60", "backup"]
    cli += ["--url", cluster.url(node), "--admin-token", ADMIN, "--to", backup]
    taking = subprocess.Popen(
        cli, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **ENV}
    )
    time.sleep(2)
    assert taking.poll() is None, taking.communicate()
    cluster.start(node)
    out, err = taking.communicate(timeout=90)
    assert taking.returncode == 0, err
    assert "trying again" in err and "backed up" in out
    check(backup)
