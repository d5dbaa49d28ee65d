"""Rolling upgrades from older releases to the current code, under load (issue #51).

Two releases, each the last commit before a change of what a node keeps or sends:

* ``358865d`` ("Compaction by log size"), the last before the key index and ready-log
  segments, and older than the Raft journal on disk (``HZRAFT``), the manifest dump and
  the sealed Raft link. Its data dir holds every format the current code converts on
  open: pysyncobj's journal (``PYSYNCOBJ``), pysyncobj's full dump as that release wrote
  it (``u64 n | pickle | tar``), the ready log before segments (``ready/<topic>.rdy``)
  and the key windows before the key index (``keys/<hour>.keys``); its acks are
  ``[group, topic, offset]``. Its nodes speak Fernet on the Raft link and the current
  ones the sealed link, so the two cannot talk (docs/cluster.md, "Upgrading across this
  change"): the first node upgraded waits, the second makes a majority with it and the
  two elect a master, and the old master is upgraded last and catches up.
* ``1f2a10e``, the last before the Raft shell moved into ``cluster/raft/``: its dumps
  pickle ``horologe.cluster.dial_node.DialNode``, and it predates the read lease,
  replicated leases and named pulls. Its nodes and the current ones talk, so each node
  upgraded rejoins at once: a current follower of an old master, then an old follower
  of a current one.

Compaction is forced every 10 entries, so that every node has a dump when it is
upgraded. docs/deploy.md, "Upgrades", says which versions upgrade to which.

The old cluster gets messages due hours ahead (some cancelled), messages due 8-20 s
ahead (delivered during the upgrade), and delivered messages of which a group acked some.
While the nodes are upgraded one at a time (followers first, the master last), a
producer and a consumer run through the SDK. Then: every acknowledged produce delivered,
no message twice in any ready log, none before its time, the ready logs of all nodes
identical; the hours-ahead messages still scheduled at their time (the cancelled ones
cancelled) on every node; the group's acked messages never handed out again, its unacked
ones handed out, and a new group handed them all.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from horologe.client import Client, HorologeError
from horologe.storage import MessageId
from testkit.old_release import UpgradeCluster, install_commit
from testkit.process_cluster import ADMIN, CLIENT
from testkit.waiting import wait_until

from .history import verify_ready_logs

LATER, SOON, PAST, LOAD = "later", "soon", "past", "load"
GROUP = "g"
HOUR_MS = 3_600_000


def starts_with(path: str, prefix: bytes) -> bool:
    with open(path, "rb") as f:
        return f.read(len(prefix)) == prefix


def formats_of_358865d(node: str) -> None:
    """What the current code converts: pysyncobj's journal and dump, a one-file ready
    log, key windows."""
    assert starts_with(os.path.join(node, "raft", "journal"), b"PYSYNCOBJ")
    assert not starts_with(os.path.join(node, "raft", "snapshot"), b"HZ")
    assert any(n.endswith(".keys") for n in os.listdir(os.path.join(node, "store", "keys")))
    assert any(n.count(".") == 1 for n in os.listdir(os.path.join(node, "store", "ready")))


def formats_of_1f2a10e(node: str) -> None:
    """A manifest dump whose pickle names DialNode's module before cluster/raft/."""
    with open(os.path.join(node, "raft", "snapshot"), "rb") as f:
        dump = f.read()
    assert dump.startswith(b"HZSNAP") and b"horologe.cluster.dial_node" in dump


@dataclass(frozen=True)
class Release:
    commit: str
    link_change: bool  # another Raft link format: nodes of the two versions cannot talk
    formats: Callable[[str], None]  # checks what it left in a node's folder

    def __str__(self) -> str:
        return self.commit


RELEASES = [Release("358865d", True, formats_of_358865d), Release("1f2a10e", False, formats_of_1f2a10e)]


@pytest.fixture(scope="session")
def install_release(tmp_path_factory) -> Callable[[Release], Path]:
    """A release laid out as installed, made once per session."""
    made: dict[str, Path] = {}

    def install(release: Release) -> Path:
        if release.commit not in made:
            made[release.commit] = install_commit(release.commit, tmp_path_factory.mktemp(release.commit))
        return made[release.commit]

    return install


@pytest.fixture(params=RELEASES, ids=str)
def release(request) -> Release:
    return request.param


@pytest.fixture
def upgrade_cluster(tmp_path, install_release, release, request):
    site = install_release(release)
    c = UpgradeCluster(str(tmp_path / "c"), site, extra_toml="log_compaction_min_entries = 10")
    yield c
    c.stop_all()
    c.close()
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        for i in c.indexes:
            print(f"----- n{i + 1}.log (tail) -----\n" + c.log(i)[-4000:])


def now_ms() -> int:
    return int(time.time() * 1000)


class Load:
    """A producer and a consumer through the SDK, each on its own thread and client.

    The producer sends batches of 5 to ``LOAD``, due 0.5-3 s ahead, each with its keys,
    and sends a batch again (same keys) until it is answered. The consumer pulls
    ``LOAD`` and ``SOON`` as ``GROUP`` and acks what it got.
    """

    def __init__(self, urls: list[str], max_batches: int = 300) -> None:
        self.urls = urls
        self.max_batches = max_batches
        self.stop = threading.Event()
        self.stop_producing = threading.Event()
        self.acked: dict[str, int] = {}  # id -> deliver_at, of answered produces
        self.received: dict[str, list[tuple[str, int, int]]] = {}  # id -> [(topic, deliver_at, delivered_at)]
        self.errors: dict[str, int] = {}
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._produce, self._consume)]

    def _client(self) -> Client:
        return Client(self.urls, CLIENT, admin_token=ADMIN, retry_s=5.0, timeout=5.0)

    def _error(self, what: str, e: Exception) -> None:
        key = f"{what}: {str(e)[:70]}"
        self.errors[key] = self.errors.get(key, 0) + 1
        time.sleep(0.2)

    def _produce(self) -> None:
        with self._client() as c:
            for n in range(self.max_batches):
                if self.stop_producing.is_set():
                    return
                batch = [{"topic": LOAD, "body": f"load {n}.{k}", "key": f"load-{n}-{k}"} for k in range(5)]
                while not self.stop_producing.is_set():
                    t = now_ms()
                    for k, m in enumerate(batch):
                        m["deliver_at"] = t + 500 + 500 * k
                    try:
                        results = c.request("POST", "/v1/messages/batch", {"messages": batch}).body["results"]
                    except HorologeError as e:
                        self._error("produce", e)
                        continue
                    for r in results:
                        assert "id" in r, r
                        self.acked[r["id"]] = r["deliver_at"]
                    break
                time.sleep(0.1)

    def _consume(self) -> None:
        with self._client() as c:
            while not self.stop.is_set():
                for topic in (LOAD, SOON):
                    body = {"group": GROUP, "max": 200, "wait_ms": 100, "visibility_ms": 3000}
                    try:
                        got = c.request("POST", f"/v1/topics/{topic}/pull", body).body["messages"]
                    except HorologeError as e:
                        self._error("pull", e)
                        continue
                    for m in got:
                        self.received.setdefault(m["id"], []).append(
                            (m["topic"], m["deliver_at"], m["delivered_at"])
                        )
                    if not got:
                        continue
                    try:
                        c.request(
                            "POST",
                            f"/v1/topics/{topic}/ack",
                            {"group": GROUP, "receipts": [m["receipt"] for m in got]},
                        )
                    except HorologeError as e:  # handed out again once the lease ends
                        self._error("ack", e)

    def __enter__(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(15)


def test_rolling_upgrade_from_an_older_release(upgrade_cluster, release):
    c = upgrade_cluster
    c.start_all()
    master = c.wait_connected()
    client = c.client(master)

    # Hours ahead (2 h to 5.6 h), with keys; ten of them cancelled.
    t0 = now_ms()
    later = c.produce(
        master,
        [
            {
                "topic": LATER,
                "body": f"later {k}",
                "deliver_at": t0 + 2 * HOUR_MS + k * 54_000,
                "key": f"later-{k}",
            }
            for k in range(240)
        ],
    )
    later_at = {r["id"]: r["deliver_at"] for r in later}
    cancelled = [r["id"] for r in later[::24]]
    for mid in cancelled:
        assert client.request("DELETE", f"/v1/messages/{mid}").body["state"] == "cancelled"
    # Due 8-20 s from now: delivered while the nodes are upgraded.
    soon = c.produce(
        master,
        [{"topic": SOON, "body": f"soon {k}", "deliver_at": t0 + 8_000 + k * 80} for k in range(150)],
    )
    soon_at = {r["id"]: r["deliver_at"] for r in soon}
    # Due now: delivered on the old release; the group pulls all 40 and acks 25. The other
    # 15 stay leased for a minute, on the old master only (that release kept leases there).
    past = c.produce(master, [{"topic": PAST, "body": f"past {k}", "key": f"past-{k}"} for k in range(40)])
    past_at = {r["id"]: r["deliver_at"] for r in past}
    got: dict[str, dict] = {}

    def pulled_all_past() -> bool:
        body = {"group": GROUP, "max": 100, "wait_ms": 500, "visibility_ms": 60_000}
        for m in client.request("POST", f"/v1/topics/{PAST}/pull", body).body["messages"]:
            got.setdefault(m["id"], m)
        return len(got) == len(past)

    wait_until(pulled_all_past, 20)
    acked_old = set(sorted(got)[:25])
    answer = client.request(
        "POST", f"/v1/topics/{PAST}/ack", {"group": GROUP, "receipts": [got[i]["receipt"] for i in acked_old]}
    )
    assert answer.body["acked"] == 25

    # The old release wrote what the current code must read.
    def dumped() -> bool:
        """every old node wrote its Raft dump"""
        return all(
            os.path.exists(os.path.join(c.data_root, f"n{i + 1}", "raft", "snapshot")) for i in c.indexes
        )

    wait_until(dumped, 20)
    for i in c.indexes:  # a follower's dump can come before it applied the deliveries
        c.catch_up(i, behind=0)
        release.formats(os.path.join(c.data_root, f"n{i + 1}"))

    # Followers first, one at a time, the master last, under load.
    first, second = (i for i in c.indexes if i != master)
    with Load([c.url(i) for i in c.indexes]) as load:
        wait_until(lambda: len(load.acked) >= 50, 20)
        for i in (first, second, master):
            started = time.monotonic()
            c.upgrade(i)
            if release.link_change and i == first:
                pass  # it cannot hear the old nodes: it waits, and they serve
            elif release.link_change and i == second:
                # The two upgraded nodes elect a master of their own; the old one is left alone.
                c.wait_leader(among=[first, second], timeout_s=30)
                c.catch_up(second, among=[first, second])
                c.catch_up(first, among=[first, second])
            else:
                leader = c.wait_connected(timeout_s=30)
                assert i != master or leader != master, "the old master did not hand over"
                c.catch_up(i)
            n = len(load.acked)
            wait_until(lambda n=n: len(load.acked) >= n + 50, 30)
            print(f"n{i + 1} upgraded and 50 more produced in {time.monotonic() - started:.1f} s")
        load.stop_producing.set()
        want = {LOAD: set(load.acked), SOON: set(soon_at)}

        def consumed_everything() -> bool:
            """the consumer got every acknowledged produce and every soon message"""
            return all(ids <= set(load.received) for ids in want.values())

        try:
            wait_until(consumed_everything, 40)
        except TimeoutError:
            missing = {topic: len(ids - set(load.received)) for topic, ids in want.items()}
            raise AssertionError(f"never received, by topic: {missing}; errors {load.errors}") from None
    print(f"all consumed {now_ms() - t0} ms after the first produce; {len(load.acked)} produced under load,")
    print(f"{len(load.received)} received (load and soon); errors {load.errors}")

    # The consumer: nothing early.
    for mid, seen in load.received.items():
        for topic, deliver_at, delivered_at in seen:
            assert delivered_at >= deliver_at, (mid, topic, deliver_at, delivered_at)

    # The old group's progress and the old ready log, served by the upgraded cluster: the
    # group gets the 15 it did not ack (their leases lived on the old master), a new group all 40.
    def pull_all(group: str) -> list[dict]:
        body = {"group": group, "max": 100, "wait_ms": 500}
        return client.request("POST", f"/v1/topics/{PAST}/pull", body).body["messages"]

    client = c.client(c.wait_leader())
    again = pull_all(GROUP)
    assert {m["id"] for m in again} == set(past_at) - acked_old, "the group's acks on the old release"
    fresh = pull_all("fresh")
    assert sorted(m["id"] for m in fresh) == sorted(past_at)
    for m in again + fresh:
        assert m["delivered_at"] >= m["deliver_at"] == past_at[m["id"]], m

    # The upgraded cluster serves the old messages, entered at any node: those hours
    # ahead still scheduled at their time, the cancelled ones cancelled, all in the forecast.
    for i in c.indexes:
        sdk = c.client(i)
        for mid, deliver_at in later_at.items():
            status = sdk.status(mid)
            state = "cancelled" if mid in cancelled else "scheduled"
            assert (status.state, status.deliver_at) == (state, deliver_at), (i, status)
        forecast = sdk.forecast(topic=LATER, bucket="1h", end=t0 + 7 * HOUR_MS)
        assert forecast.before == 0 and sum(n for _, n in forecast.buckets) == len(later_at) - len(cancelled)

    c.stop_all()
    for i in c.indexes:
        assert starts_with(os.path.join(c.data_root, f"n{i + 1}", "raft", "journal"), b"HZRAFT"), f"n{i + 1}"
    verify_ready_logs(c, LOAD, load.acked)
    verify_ready_logs(c, SOON, soon_at)
    verify_ready_logs(c, PAST, past_at)
    for i in c.indexes:  # and every replica holds them as they were
        with c.store(i) as s:
            assert len(s.read_ready(LATER)) == 0, f"n{i + 1} delivered a message hours early"
            for mid, deliver_at in later_at.items():
                stored = s.read_message(MessageId.parse(mid))
                assert (stored.message.topic, stored.message.deliver_at_ms) == (LATER, deliver_at)
                assert s.is_cancelled(MessageId.parse(mid)) == (mid in cancelled), (i, mid)
