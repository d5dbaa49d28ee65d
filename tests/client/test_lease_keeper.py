"""A worker's held leases renewed until it lets them go (horologe/client/lease_keeper.py)."""

from __future__ import annotations

import logging
import time

from horologe.client.errors import UnavailableError
from horologe.client.lease_keeper import STALE_S, LeaseKeeper
from horologe.client.limits import MAX_ITEMS


class _Cluster:
    """Answers extend calls: every receipt renewed but those listed as ended."""

    def __init__(self, ended=(), fail=0) -> None:
        self.calls: list[tuple[str, str, list[str], int]] = []
        self.ended = set(ended)
        self.fail = fail

    def extend(self, topic, group, receipts, visibility_ms):
        if self.fail:
            self.fail -= 1
            raise UnavailableError("no master")
        self.calls.append((topic, group, list(receipts), visibility_ms))
        return {"extended": len(set(receipts) - self.ended), "lease_until": 0}


def test_what_is_held_is_renewed_per_topic_and_group_until_let_go():
    cluster = _Cluster()
    keeper = LeaseKeeper(cluster, 9_000, every_s=3600)  # rounds by hand
    try:
        keeper.hold("q", "q", ["a", "b", "c"])
        keeper.hold("other", "other", ["x"])
        assert keeper.renew() == 4
        assert sorted(cluster.calls) == [("other", "other", ["x"], 9_000), ("q", "q", ["a", "b", "c"], 9_000)]
        keeper.let_go("q", "q", ["a", "c"])
        keeper.let_go("other", "other", ["x"])
        keeper.let_go("never", "held", ["z"])  # nothing to let go of: no error
        cluster.calls.clear()
        assert keeper.renew() == 1 and cluster.calls == [("q", "q", ["b"], 9_000)]
        keeper.let_go("q", "q", ["b"])
        cluster.calls.clear()
        assert keeper.renew() == 0 and cluster.calls == [] and keeper.held() == 0
    finally:
        keeper.close()


def test_a_prefetch_larger_than_one_call_takes_is_renewed_in_several():
    cluster = _Cluster()
    keeper = LeaseKeeper(cluster, 9_000, every_s=3600)
    receipts = [f"r{i:05d}" for i in range(MAX_ITEMS + 5)]
    keeper.hold("q", "q", receipts)
    assert keeper.renew() == len(receipts)
    assert [len(c[2]) for c in cluster.calls] == [MAX_ITEMS, 5]
    keeper.close()


def test_a_lease_that_ended_is_said_and_a_failed_call_tried_again(caplog):
    cluster = _Cluster(ended={"b"}, fail=1)
    keeper = LeaseKeeper(cluster, 9_000, every_s=3600)
    keeper.hold("q", "q", ["a", "b"])
    with caplog.at_level(logging.WARNING, logger="horologe.client.lease_keeper"):
        assert keeper.renew() == 0  # no master this round
        assert keeper.renew() == 1
        assert keeper.renew() == 1  # the same one ended: said once, not every round
        cluster.ended.add("a")
        assert keeper.renew() == 0
        keeper.let_go("q", "q", ["a"])  # an ended one let go, and another ends: said again
        keeper.hold("q", "q", ["c"])
        cluster.ended.add("c")
        assert keeper.renew() == 0
    said = [r.getMessage() for r in caplog.records]
    assert said[0].startswith("2 leases on q/q not renewed (tried again soon)"), said
    assert said[1].startswith("1 of 2 leases held on q/q had ended before they were renewed"), said
    assert said[2].startswith("2 of 2 leases held on q/q had ended before they were renewed"), said
    assert said[3].startswith("2 of 2 leases held on q/q had ended before they were renewed"), said
    assert len(said) == 4, said
    keeper.close()


def test_the_thread_renews_while_leases_are_held_and_starts_with_the_first_hold():
    cluster = _Cluster()
    keeper = LeaseKeeper(cluster, 600)  # every 0.2 s
    time.sleep(0.5)
    assert cluster.calls == []  # nothing held: no thread, no call (a publisher's channel)
    keeper.hold("q", "q", ["a"])
    deadline = time.monotonic() + 10
    while len(cluster.calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    keeper.close()
    assert len(cluster.calls) >= 2 and cluster.calls[0] == ("q", "q", ["a"], 600)
    after = len(cluster.calls)
    time.sleep(0.5)
    assert len(cluster.calls) == after  # closed: no more


def test_a_consumer_loop_silent_past_the_stale_time_has_its_leases_left_to_end(caplog):
    """A worker whose main loop is stuck (a deadlock) must not keep its tasks for good."""
    now = [0.0]
    cluster = _Cluster()
    keeper = LeaseKeeper(cluster, 9_000, every_s=3600, clock=lambda: now[0])
    keeper.hold("q", "q", ["a"])
    now[0] = STALE_S - 1
    assert keeper.renew() == 1
    now[0] = STALE_S + 1  # no beat since the start
    with caplog.at_level(logging.WARNING, logger="horologe.client.lease_keeper"):
        assert keeper.renew() == 0 and keeper.renew() == 0
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "consumer loop has not run for 31 s: the 1 leases" in said[0], said
    keeper.beat()
    assert keeper.renew() == 1 and len(cluster.calls) == 2
    keeper.close()


def test_a_consumer_loop_handing_messages_over_is_not_silent_however_long_it_takes(caplog):
    """Celery's solo pool runs a task inside the hand-over, and a busy prefork pool waits
    there for a process: the loop was taken for stuck and its leases left to end."""
    now = [0.0]
    cluster = _Cluster()
    keeper = LeaseKeeper(cluster, 9_000, every_s=3600, clock=lambda: now[0])
    keeper.hold("q", "q", ["a"])
    with caplog.at_level(logging.WARNING, logger="horologe.client.lease_keeper"), keeper.handing_over():
        now[0] = 10 * STALE_S
        assert keeper.renew() == 1
    now[0] += STALE_S - 1  # silent since the hand-over ended
    assert keeper.renew() == 1
    assert caplog.records == []
    now[0] += 2
    assert keeper.renew() == 0
    keeper.close()
