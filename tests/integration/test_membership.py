"""Changes of the membership on real node processes, through the command line
(``horologe cluster``; cluster/raft/membership.py): the master's machine replaced, a
cluster grown from 3 to 5 that then loses two, and the refusals. Messages produced before
each change are delivered after it, each once and none early; a restarted node knows the
membership from its log, whatever its config file lists; a member down while a node was
added takes the log from that node leading, without deposing it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from horologe.client import HorologeError
from horologe.cluster.raft.membership import JOIN_FRESH_DUMP_ENTRIES
from testkit.process_cluster import ADMIN, ENV, Cluster, free_port_beside, free_ports
from testkit.waiting import wait_until

TOPIC, GROUP = "membership", "g"


def _horologe(*args: str) -> subprocess.CompletedProcess:
    cli = [sys.executable, "-m", "horologe", *args]
    return subprocess.run(cli, capture_output=True, text=True, timeout=120, env={**os.environ, **ENV})


def _add(cluster: Cluster, k: int, via: int, catch_up_s: float = 60.0) -> subprocess.CompletedProcess:
    return _horologe(
        "cluster", "add", f"n{k + 1}",
        "--raft", f"127.0.0.1:{cluster.raft_ports[k]}",
        "--http", f"127.0.0.1:{cluster.http_ports[k]}",
        "--url", cluster.url(via),
        "--catch-up-s", str(catch_up_s),
    )  # fmt: skip


def _voters(cluster: Cluster, i: int) -> list[str]:
    return sorted(m["node_id"] for m in cluster.client(i).members() if m["voter"])


def _produce_soon(cluster: Cluster, via: int, count: int, after_ms: int) -> set[str]:
    messages = [{"topic": TOPIC, "body": f"m{n}", "deliver_after": after_ms} for n in range(count)]
    return {r["id"] for r in cluster.produce(via, messages)}


def _consume_all(cluster: Cluster, via: int, expected: set[str], timeout_s: float = 40.0) -> None:
    """Pull ``expected`` through node ``via`` and ack it: each once, none before its time."""
    client = cluster.client(via, retry_s=20.0)
    seen: list[str] = []

    def consumed() -> bool:
        batch = client.pull(TOPIC, GROUP, max=100, wait_ms=500)
        for m in batch:
            assert m.delivered_at >= m.deliver_at, f"{m.id} handed out before its time"
            seen.append(m.id)
        if batch:
            client.ack(TOPIC, GROUP, batch.receipts())
        return set(seen) >= expected

    wait_until(consumed, timeout_s)
    assert len(seen) == len(set(seen)), "a message was handed out twice"
    assert set(seen) == expected


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(str(tmp_path), 3)
    c.start_all()
    yield c
    c.stop_all()
    c.close()


def test_the_masters_machine_is_replaced_online(cluster):
    """Add n4, then remove the master (it hands over first), then stop it: the three left
    serve, and deliver what was produced before, once each. Restarted with their config
    files (which list the old master, not n4), they hold the membership of their log."""
    master = cluster.wait_connected()
    pending = _produce_soon(cluster, master, 30, after_ms=4_000)
    k = cluster.joiner(cluster.indexes)
    cluster.start(k)
    cluster.wait_serving(k)
    added = _add(cluster, k, via=(master + 1) % 3)
    assert added.returncode == 0, added.stderr
    assert sorted(m["node_id"] for m in json.loads(added.stdout) if m["voter"]) == ["n1", "n2", "n3", "n4"]

    removed = _horologe("cluster", "remove", f"n{master + 1}", "--url", cluster.url(k))
    assert removed.returncode == 0, removed.stderr
    assert "is the master: releasing it first" in removed.stderr
    left = [i for i in cluster.indexes if i != master]
    assert sorted(m["node_id"] for m in json.loads(removed.stdout)) == sorted(f"n{i + 1}" for i in left)
    cluster.stop(master)
    cluster.wait_connected()
    _consume_all(cluster, k, pending)

    for i in left:  # a restart keeps the membership its log holds, not its config file's
        cluster.stop(i)
    for i in left:
        cluster.start(i)
    cluster.wait_connected()
    assert _voters(cluster, k) == sorted(f"n{i + 1}" for i in left)
    assert {p for p in cluster.http.get(f"{cluster.url(left[0])}/readyz").result()["links"]} == {
        f"n{i + 1}" for i in left[1:]
    }
    later = _produce_soon(cluster, left[0], 10, after_ms=500)
    _consume_all(cluster, left[1], later)


def test_a_node_added_to_a_long_log_is_fed_from_a_fresh_dump(cluster):
    """Fed the log from the last dump (here none: the cluster never took one), a joiner
    would apply every entry after it was added, serving nothing meanwhile. The master
    writes a dump first and ships that; the joiner applies only what came after."""
    master = cluster.wait_connected()
    client = cluster.client(master)
    _log_past_a_fresh_dump(client)
    before = cluster.status(master)["commit_index"]
    assert before > JOIN_FRESH_DUMP_ENTRIES
    k = cluster.joiner(cluster.indexes)
    cluster.start(k)
    cluster.wait_serving(k)
    added = _add(cluster, k, via=master)
    assert added.returncode == 0, added.stderr
    installed = [int(i) for i in re.findall(r"installing snapshot at index (\d+)", cluster.log(k))]
    assert installed and installed[0] >= before, installed
    assert "membership: a dump first, to feed n4 from (the last at index 0" in cluster.log(master)


def _log_past_a_fresh_dump(client) -> None:
    """Entries enough (one each) that a node added now is fed from a dump taken first."""
    for n in range(JOIN_FRESH_DUMP_ENTRIES + 100):
        client.produce(TOPIC, f"m{n}", deliver_after="1d")


def test_grown_to_five_the_cluster_survives_the_loss_of_two_then_shrinks(cluster):
    """3 → 5 by two adds, one after the other; then two of the first three are killed,
    the master among them: the other three elect a master and deliver everything. The two
    dead ones are removed while down (5 → 3), and the three go on serving."""
    master = cluster.wait_connected()
    pending = _produce_soon(cluster, master, 30, after_ms=6_000)
    for _ in range(2):
        k = cluster.joiner(cluster.indexes)
        cluster.start(k)
        cluster.wait_serving(k)
        commit = cluster.status(master)["commit_index"]
        added = _add(cluster, k, via=master)
        assert added.returncode == 0, added.stderr
        # It counts only once it holds what was committed when its catch-up began.
        assert cluster.status(k)["applied_index"] >= commit
    assert _voters(cluster, master) == ["n1", "n2", "n3", "n4", "n5"]
    cluster.wait_connected()
    killed = [master, next(i for i in range(3) if i != master)]
    for i in killed:
        cluster.signal(i, signal.SIGKILL)
    survivors = [i for i in cluster.indexes if i not in killed]
    cluster.wait_leader(survivors)
    _consume_all(cluster, survivors[0], pending)

    for i in killed:
        removed = _horologe("cluster", "remove", f"n{i + 1}", "--url", cluster.url(survivors[0]))
        assert removed.returncode == 0, removed.stderr
    assert _voters(cluster, survivors[1]) == sorted(f"n{i + 1}" for i in survivors)
    cluster.wait_connected()
    later = _produce_soon(cluster, survivors[2], 10, after_ms=500)
    _consume_all(cluster, survivors[0], later)


def test_refused_changes_leave_the_membership_as_it_was(cluster):
    master = cluster.wait_connected()
    client = cluster.client(master)
    with pytest.raises(HorologeError) as taken:
        client.add_member("n2", "127.0.0.1:1", "127.0.0.1:2")
    assert (taken.value.status, taken.value.code) == (409, "member_exists")
    with pytest.raises(HorologeError) as unknown:
        client.remove_member("n9")
    assert (unknown.value.status, unknown.value.code) == (422, "unknown_node")

    # With one follower down, removing the other would leave a membership whose majority
    # needs the down one: the cluster would stop.
    down, other = [i for i in range(3) if i != master]
    cluster.stop(down)
    with pytest.raises(HorologeError) as stall:
        client.remove_member(f"n{other + 1}")
    assert (stall.value.status, stall.value.code) == (409, "would_lose_quorum")
    cluster.start(down)
    cluster.wait_connected()

    k = cluster.joiner(cluster.indexes)  # configured, not started yet
    unstarted = _add(cluster, k, via=master)
    assert unstarted.returncode == 1 and "not_reachable" in unstarted.stderr, unstarted.stderr
    cluster.start(k)
    cluster.wait_serving(k)
    with pytest.raises(HorologeError) as outside:  # it says why it knows no master
        cluster.client(k, retry_s=0).produce(TOPIC, "x")
    assert "not the master, and knows none: this node is not a voting member" in str(outside.value)
    wrong_id = _horologe(
        "cluster", "add", "n9",  # it is n{k + 1}: the members would know it by another name
        "--raft", f"127.0.0.1:{cluster.raft_ports[k]}",
        "--http", f"127.0.0.1:{cluster.http_ports[k]}",
        "--url", cluster.url(master),
    )  # fmt: skip
    assert wrong_id.returncode == 1 and "wrong_node" in wrong_id.stderr, wrong_id.stderr
    assert f"is n{k + 1}, not n9" in wrong_id.stderr
    wrong_raft = _horologe(
        "cluster", "add", f"n{k + 1}",
        "--raft", "127.0.0.1:1",  # not the address it knows itself by, nor listens at
        "--http", f"127.0.0.1:{cluster.http_ports[k]}",
        "--url", cluster.url(master),
    )  # fmt: skip
    assert wrong_raft.returncode == 1 and "wrong_raft" in wrong_raft.stderr, wrong_raft.stderr
    assert f"has raft = '127.0.0.1:{cluster.raft_ports[k]}' in its config" in wrong_raft.stderr

    # Its config names a Raft address where nothing listens (it binds another; being the
    # lower address, it waits for the master to dial it): it never catches up.
    with open(cluster.configs[k]) as f:
        config = f.read()
    cluster.stop(k)
    with open(cluster.configs[k], "w") as f:
        f.write(config.replace(f'raft = "127.0.0.1:{cluster.raft_ports[k]}"', 'raft = "127.0.0.1:1"'))
    cluster.start(k)
    cluster.wait_serving(k)
    down = f"http://127.0.0.1:{free_ports(1)[0]}"  # listed first, and answers nothing (a machine down)
    unreachable = _horologe(
        "cluster", "add", f"n{k + 1}",
        "--raft", "127.0.0.1:1",
        "--http", f"127.0.0.1:{cluster.http_ports[k]}",
        "--url", f"{down},{cluster.url(master)}",
        "--catch-up-s", "3",
    )  # fmt: skip
    assert unreachable.returncode == 1 and "catch_up_failed" in unreachable.stderr, unreachable.stderr
    assert f"n{k + 1} holds the log up to 0 of " in unreachable.stderr  # the progress it printed
    assert [m["node_id"] for m in client.members()] == [
        f"n{master + 1}",
        *sorted(f"n{i + 1}" for i in range(3) if i != master),
    ]  # the learner is gone too

    # The node is added once it is given right (the failed attempts left nothing behind).
    cluster.stop(k)
    with open(cluster.configs[k], "w") as f:
        f.write(config)
    cluster.start(k)
    cluster.wait_serving(k)
    added = _add(cluster, k, via=master)
    assert added.returncode == 0, added.stderr
    assert _voters(cluster, master) == ["n1", "n2", "n3", "n4"]


@pytest.mark.parametrize("fed", ["log", "dump"])
@pytest.mark.parametrize("dialler", ["added", "returning"])
def test_a_member_down_while_a_node_was_added_catches_up_from_it_as_master(cluster, dialler, fed):
    """n_f is down while n4 is added and made master; back, its log lacks n4, and it must
    take the log from n4 while n4 goes on leading in the same term. The members name n4 in
    their keep-alives, so n_f links to it: whichever of the two dials (``dialler``), which
    the order of their addresses decides. With a long log (``fed`` "dump"), n4 is fed from
    a fresh dump taken before its add, and the log is cut there: n_f installs that dump,
    whose membership lacks n4, then takes the add from the log after it."""
    master = cluster.wait_connected()
    above = dialler == "added"  # the added node's address above n_f's: it dials
    followers = sorted((i for i in cluster.indexes if i != master), key=lambda i: cluster.raft_ports[i])
    down = followers[0] if above else followers[-1]
    cluster.stop(down)
    if fed == "dump":
        _log_past_a_fresh_dump(cluster.client(master))
    in_use = [*cluster.http_ports, *cluster.raft_ports]
    k = cluster.joiner(cluster.indexes, raft_port=free_port_beside(cluster.raft_ports[down], above, in_use))
    cluster.start(k)
    cluster.wait_serving(k)
    added = _add(cluster, k, via=master)
    assert added.returncode == 0, added.stderr
    # The other follower links to n4 once it applied the add, which may come after the
    # answer: a release to n4 before that is refused (409 no_linked_target), as it should be.
    up = [i for i in cluster.indexes if i not in (down, k)]
    wait_until(lambda: cluster.ready(k, among=up), 10.0)
    released = cluster.to_master("POST", "/admin/release-master", {"to": f"n{k + 1}"}, token=ADMIN)
    assert released.status == 200, released.body
    term = cluster.status(k)["term"]
    cluster.start(down)
    cluster.wait_serving(down)

    def caught_up() -> bool:
        lead = cluster.status(k)
        assert (lead["role"], lead["term"]) == ("master", term), f"n{k + 1} deposed: {lead['term']}"
        return cluster.status(down)["applied_index"] >= lead["commit_index"]

    wait_until(caught_up, 15.0)
    assert _voters(cluster, down) == ["n1", "n2", "n3", "n4"]  # it took the change from n4's log
    assert cluster.status(k)["term"] == term
    # The link made before the change is the one kept: taking n4 as a member opens no second
    # (pysyncobj's addNode would, and leave the first open for good).
    for _ in range(30):
        links = _raft_links(cluster, down, k)
        assert len(links) == 1, links
        time.sleep(0.1)
    # Each end counts that link as up: the member's status, /readyz, and its tick thread's
    # wait (an unlinked peer keeps it ticking every 5 ms) read it so.
    wait_until(lambda: cluster.ready(down, among=[k]) and cluster.ready(k, among=[down]), 5.0)
    if fed == "dump":
        assert "installing snapshot" in cluster.log(down)


def test_a_node_whose_peers_omit_the_master_is_refused_at_once(cluster):
    """A node started to join with peers that leave out the master (a config written
    before the master's machine was replaced, say) dials only those peers, which hang up
    on it until they are told of it, and hangs up itself on the master's calls: whichever
    of the two dials, the master never fed it, and the add failed once its catch-up time
    ran out (``catch_up_failed``). It is refused at once, naming the peers the node has;
    started again with the master among them, it is added."""
    master = cluster.wait_connected()
    others = [i for i in cluster.indexes if i != master]
    k = cluster.joiner(others)
    with open(cluster.configs[k]) as f:
        config = f.read()
    cluster.start(k)
    cluster.wait_serving(k)
    refused = _add(cluster, k, via=master, catch_up_s=15.0)
    assert refused.returncode == 1 and "master_not_a_peer" in refused.stderr, refused.stderr
    dials = ", ".join(f"n{i + 1} at 127.0.0.1:{cluster.raft_ports[i]}" for i in others)
    assert f"among the peers it dials ({dials}:" in refused.stderr
    assert "holds the log up to" not in refused.stderr  # refused before any feeding
    assert _voters(cluster, master) == ["n1", "n2", "n3"]

    cluster.stop(k)
    with open(cluster.configs[k], "w") as f:
        f.write(
            f"{config}[peers.n{master + 1}]\n"
            f'http = "127.0.0.1:{cluster.http_ports[master]}"\n'
            f'raft = "127.0.0.1:{cluster.raft_ports[master]}"\n'
        )
    cluster.start(k)
    cluster.wait_serving(k)
    added = _add(cluster, k, via=master, catch_up_s=15.0)
    assert added.returncode == 0, added.stderr
    assert _voters(cluster, master) == ["n1", "n2", "n3", "n4"]


def _raft_links(cluster: Cluster, i: int, j: int) -> list[str]:
    """The established TCP connections between nodes ``i`` and ``j`` to either one's Raft
    port, each named at the end that dialled (the process whose remote end it is)."""
    return _dialled(cluster, i, j) + _dialled(cluster, j, i)


def _dialled(cluster: Cluster, i: int, j: int) -> list[str]:
    """Node ``i``'s established connections to node ``j``'s Raft port. The kernel is asked
    with the port as a filter (``ss``, over netlink), so the few sockets that match come in
    one answer; a read of /proc/net/tcp, a page at a time, was seen to list one connection
    many times while connections opened and closed."""
    port = cluster.raft_ports[j]
    query = ["ss", "-Htne", "state", "established", "dport", "=", f":{port}"]
    rows = [
        line.split()
        for line in subprocess.run(query, capture_output=True, text=True, check=True).stdout.splitlines()
    ]
    fds = f"/proc/{cluster.procs[i].pid}/fd"
    owned = set()
    for fd in os.listdir(fds):
        try:
            owned.add(os.readlink(f"{fds}/{fd}"))
        except FileNotFoundError:
            continue  # closed meanwhile
    # Columns with a state filter: Recv-Q Send-Q local peer, then ino:N among the details.
    return [
        f"n{i + 1} {r[2]} -> n{j + 1} {r[3]}"
        for r in rows
        if any(f"socket:[{f.removeprefix('ino:')}]" in owned for f in r[4:] if f.startswith("ino:"))
    ]


def test_a_node_started_once_without_join_is_still_added_once_started_to_join(cluster):
    """A new node started by mistake without ``join`` takes the members for its peers and
    asks them for pre-votes, which they drop (it is outside their membership): its term
    and theirs stay as they were. Its add is refused (it was not started to join); started
    again to join, it is added. (A node whose term climbed on elections it stood in alone,
    before the pre-vote, starts to join at term 0:
    tests/cluster/test_membership_rules.py.)"""
    master = cluster.wait_connected()
    k = cluster.joiner(cluster.indexes)
    with open(cluster.configs[k]) as f:
        joining = f.read()
    with open(cluster.configs[k], "w") as f:
        f.write(joining.replace("join = true\n", ""))
    cluster.start(k)
    cluster.wait_serving(k)
    members_term = cluster.status(master)["term"]
    time.sleep(3.0)  # five to ten election timeouts
    assert cluster.status(k)["term"] == 0 and cluster.status(master)["term"] == members_term
    refused = _add(cluster, k, via=master, catch_up_s=5.0)  # refused at once: it would never catch up
    assert refused.returncode == 1 and "not_joining" in refused.stderr, refused.stderr
    cluster.stop(k)
    with open(cluster.configs[k], "w") as f:
        f.write(joining)
    cluster.start(k)
    cluster.wait_serving(k)
    added = _add(cluster, k, via=master, catch_up_s=15.0)
    assert added.returncode == 0, added.stderr
    assert _voters(cluster, master) == ["n1", "n2", "n3", "n4"]
    assert cluster.status(master)["term"] == members_term  # its asks moved nobody


def test_a_change_asked_of_a_follower_by_another_name_of_its_host_reaches_the_master(cluster):
    """The follower redirects to the master's address as configured (another host, where
    the nodes are on several machines, as deploy.md has them): the SDK follows a redirect
    only to a host it was given, so `cluster remove` through a follower's URL exited 1,
    and a removal of the master stopped once released, still a member."""
    master = cluster.wait_leader()
    follower, other = (i for i in cluster.indexes if i != master)
    via = cluster.url(follower).replace("127.0.0.1", "localhost")
    done = _horologe("cluster", "remove", f"n{other + 1}", "--url", via)
    assert done.returncode == 0, done.stderr
    wait_until(lambda: _voters(cluster, master) == sorted(f"n{i + 1}" for i in (master, follower)), 20)
