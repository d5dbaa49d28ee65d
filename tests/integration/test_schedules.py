"""Recurring schedules on a real 3-node cluster: a schedule firing every second keeps firing
through a SIGKILL of the master, every fire time exactly once; pause, resume and delete
do what docs/api.md says; bad requests are refused with nothing proposed."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from horologe.client import Client, ConflictError, HorologeError, InvalidRequestError, NotFoundError
from horologe.storage import check_store
from testkit.process_cluster import CLIENT, Cluster
from testkit.waiting import wait_until

# A short horizon, so that planning has to go on at the new master after the kill.
SETTINGS = "schedule_horizon_ms = 4000\nschedule_check_ms = 200\n"
S = 1000


class Collector(threading.Thread):
    """Pulls a topic as one group (through every node's URL) and acks; keeps each message
    by id, since a failover may hand out again what was leased and not yet acked."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        super().__init__(daemon=True)
        self.client = Client([cluster.url(i) for i in cluster.indexes], CLIENT, retry_s=1, timeout=5)
        self.topic = topic
        self.got: dict[str, tuple[int, int, dict]] = {}  # id -> (deliver_at, delivered_at, headers)
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                batch = self.client.pull(self.topic, "g", max=100, wait_ms=300)
                for m in batch:
                    self.got[m.id] = (m.deliver_at, m.delivered_at, m.headers)
                if batch:
                    self.client.ack(self.topic, "g", batch.receipts())
            except HorologeError:
                time.sleep(0.1)

    def fire_times(self) -> list[int]:
        return sorted(at for at, _, _ in self.got.values())

    def stop(self) -> None:
        self.halt.set()
        self.join(10)
        self.client.close()


def client(cluster: Cluster) -> Client:
    return Client([cluster.url(i) for i in cluster.indexes], CLIENT, retry_s=15, timeout=10)


def test_every_second_through_a_master_sigkill_each_fire_time_once(make_cluster):
    cluster = make_cluster(extra_toml=SETTINGS)
    c = client(cluster)
    made = c.create_schedule("tick", "ticks", "tock", "* * * * * *", "Europe/Berlin")
    first = made.created_at - made.created_at % S + S
    # The next five after the clock as the node answers: the create's commit may cross a
    # second, and ``first`` is then past (it still fires: every fire time is checked below).
    assert made.state == "active" and made.next_fires[0] in (first, first + S)
    assert made.next_fires == [made.next_fires[0] + k * S for k in range(5)]
    collector = Collector(cluster, "ticks")
    collector.start()
    wait_until(lambda: len(collector.got) >= 5, 20)
    old = cluster.wait_leader()
    cluster.signal(old, signal.SIGKILL)
    cluster.wait_leader([i for i in cluster.indexes if i != old], exclude=old)
    killed_at = int(time.time() * 1000)
    # planning goes on at the new master, a horizon past what the old one planned
    wait_until(lambda: collector.fire_times()[-1] >= killed_at + 6 * S, 30)
    cluster.start(old)
    cluster.catch_up(old)
    c.delete_schedule("tick")
    deleted_at = int(time.time() * 1000)
    time.sleep(1.5)  # anything still to arrive would be a firing the delete left behind
    collector.stop()

    fires = collector.fire_times()
    assert len(fires) == len(set(fires)), "a fire time was delivered as two messages"
    assert fires == list(range(first, fires[-1] + 1, S)), "a fire time was skipped"
    assert killed_at + 6 * S <= fires[-1] <= deleted_at + S
    for at, delivered, headers in collector.got.values():
        assert delivered >= at and headers == {"x-horologe-schedule": "tick"}
    with pytest.raises(NotFoundError):
        c.schedule("tick")

    cluster.stop_all()
    for i in cluster.indexes:  # every replica's ready log: each fire time once, none cancelled lost
        with cluster.store(i) as store:
            rows = store.read_ready("ticks")
            assert sorted(rows["deliver_at_ms"].tolist()) == fires, f"n{i + 1}"
            check_store(store)
    c.close()


def test_pause_resume_delete_and_refusals(make_cluster):
    cluster = make_cluster(extra_toml=SETTINGS)
    c = client(cluster)
    collector = Collector(cluster, "p")
    collector.start()
    base = {"name": "p", "topic": "p", "body": "x", "cron": "* * * * * *", "timezone": "UTC"}

    # refused before anything is proposed: no schedule appears, no entry is skipped
    for bad, field in [
        ({"cron": "* * * *"}, "cron"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"name": "no spaces"}, "name"),
        ({"body_b64": "AAE="}, "body"),
        ({"start_at": 2 * S, "end_at": S}, "end_at"),
        ({"every": "second"}, "every"),
    ]:
        with pytest.raises(InvalidRequestError) as e:
            c.request("POST", "/v1/schedules", {**base, **bad})
        assert e.value.status == 400 and e.value.field == field, e.value
    with pytest.raises(InvalidRequestError) as e:
        c.request("POST", "/v1/schedules", {**base, "cron": "0 0 31 2 *"})
    assert (e.value.status, e.value.code) == (422, "out_of_range")
    assert c.schedules() == []
    assert all(cluster.status(i)["skipped_entries"] == 0 for i in cluster.indexes)

    c.request("POST", "/v1/schedules", base)
    assert c.request("POST", "/v1/schedules", base).status == 200  # the same again
    with pytest.raises(ConflictError):
        c.request("POST", "/v1/schedules", {**base, "body": "other"})
    wait_until(lambda: len(collector.got) >= 2, 20)

    paused = c.pause_schedule("p")
    paused_at = int(time.time() * 1000)
    assert paused.state == "paused" and paused.next_fires == []
    assert c.pending("p").messages == []  # what was planned ahead is cancelled
    time.sleep(2.5)
    assert all(at <= paused_at for at in collector.fire_times()), "fired while paused"
    before = set(collector.fire_times())

    resumed = c.resume_schedule("p")
    resumed_at = int(time.time() * 1000)
    assert resumed.state == "active" and resumed.planned_until >= resumed_at - 2 * S
    assert resumed.next_fires[0] > resumed.planned_until
    wait_until(lambda: len(collector.fire_times()) >= len(before) + 3, 20)
    after = [at for at in collector.fire_times() if at not in before]
    assert min(after) > resumed.planned_until, "a firing of the paused time came back"
    assert after == list(range(min(after), max(after) + 1, S))

    c.delete_schedule("p")
    deleted_at = int(time.time() * 1000)
    assert c.pending("p").messages == [] and c.schedules() == []
    with pytest.raises(NotFoundError):
        c.pause_schedule("p")
    with pytest.raises(NotFoundError):
        c.delete_schedule("p")
    time.sleep(2)
    collector.stop()
    assert all(at <= deleted_at for at in collector.fire_times()), "fired after the delete"
    fires = collector.fire_times()
    assert len(fires) == len(set(fires))
    c.close()
