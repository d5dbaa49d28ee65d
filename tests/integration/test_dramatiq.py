"""Dramatiq on Horologe, as a user runs it: two ``dramatiq`` worker processes on a 3-node
cluster; messages sent with delays; the master released, then SIGKILLed, while they wait
and fall due. Every message is processed once, none early."""

from __future__ import annotations

import os
import random
import signal
import sys
import textwrap
import threading
import time

import pytest

from testkit.process_cluster import CLIENT
from testkit.task_queues import (
    app_module,
    dead_lettered,
    dramatiq_slow_app,
    executions,
    faults,
    start_workers,
    stop_workers,
    verdict,
    wait_executed,
)
from testkit.waiting import wait_until

N = 200
# Leases of 10 s (a message takes 0.2 s), so that a message whose lease outlived a lost
# pull answer (a pull sent again on the same master while its first commit was still under
# way: docs/task-queues.md) still runs within the 90 s the test waits.

APP = textwrap.dedent(
    """
    import json, os, time

    import dramatiq
    from horologe.dramatiq import HorologeBroker

    broker = HorologeBroker(os.environ["NODES"].split(","), os.environ["HOROLOGE_CLIENT_TOKEN"],
                            visibility_ms=10_000)
    dramatiq.set_broker(broker)


    @dramatiq.actor(queue_name="acc", max_retries=0)
    def probe(seq, eta_ms):
        row = {"id": seq, "attempt": 0, "eta_ms": eta_ms, "start_ms": time.time() * 1000, "pid": os.getpid()}
        with open(os.path.join(os.environ["OUT"], f"{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\\n")
            f.flush()
        time.sleep(0.2)  # a task that takes a while: leased, not yet acked, when the master dies
    """
)


def test_dramatiq_messages_run_once_on_time_across_a_release_and_a_sigkilled_master(
    cluster, tmp_path, monkeypatch
):
    env, out = app_module(cluster, tmp_path, monkeypatch, "acc_dram", APP)
    worker = [sys.executable, "-m", "dramatiq", "acc_dram", "--processes", "1", "--threads", "4"]
    procs = start_workers([worker, worker], env, str(tmp_path))
    try:
        import acc_dram

        rng = random.Random(9)
        produced: dict[tuple[int, int], float] = {}
        for seq in range(N):
            delay = rng.randrange(1_500, 7_000)
            eta_ms = time.time() * 1000 + delay  # the master's clock is read after this: never sooner
            acc_dram.probe.send_with_options(args=(seq, eta_ms), delay=delay)
            produced[(seq, 0)] = eta_ms
        chaos = faults(cluster, (2.0, 4.5))
        wait_executed(out, N, 90)
        chaos.join(30)
        time.sleep(2)  # anything run twice would show by now
    finally:
        stop_workers(procs)
    v = verdict(executions(out), produced)
    print(f"dramatiq: {N} messages, lateness p50 {v.p(0.5):.1f} ms, p99 {v.p(0.99):.1f} ms")
    assert v.twice == [], "a message was processed twice"
    assert v.lost == [], "a message was never processed"
    assert v.early == [], "a message was processed before its time"


def test_flush_drops_waiting_and_scheduled_messages_and_join_waits_for_the_rest(cluster):
    import dramatiq
    from dramatiq.errors import QueueJoinTimeout

    from horologe.dramatiq import HorologeBroker

    broker = HorologeBroker([cluster.url(i) for i in cluster.indexes], CLIENT)
    client = cluster.client(0)
    ran: list[int] = []
    job = dramatiq.actor(ran.append, broker=broker, actor_name="job", queue_name="fl")
    for n in range(3):
        job.send(n)
    for n in range(3, 5):
        job.send_with_options(args=(n,), delay=60_000)
    deadline = time.monotonic() + 10
    while client.backlog("fl", "fl").waiting < 3:  # due messages reach the ready log at the wheel's next tick
        assert time.monotonic() < deadline
        time.sleep(0.05)
    broker.flush_all()
    assert client.backlog("fl", "fl").unacked == 0 and client.pending("fl").messages == []
    job.send(9)
    job.send_with_options(args=(10,), delay=1_000)
    with pytest.raises(QueueJoinTimeout):
        broker.join("fl", timeout=300)  # no worker yet
    worker = dramatiq.Worker(broker, worker_threads=1)
    worker.start()
    try:
        broker.join("fl", timeout=30_000)
    finally:
        worker.stop()
        broker.close()
    assert sorted(ran) == [9, 10]


def test_a_delay_below_zero_is_now_and_an_unreachable_cluster_is_dramatiqs_connection_error(cluster):
    """A delay of -5000 was refused (422), where Celery takes a past eta as now; a send that
    reached no node raised Horologe's UnavailableError, which `except dramatiq.errors.
    ConnectionError` (Dramatiq's own) did not catch."""
    import dramatiq
    from dramatiq.errors import BrokerConnectionError

    from horologe.dramatiq import HorologeBroker

    broker = HorologeBroker([cluster.url(i) for i in cluster.indexes], CLIENT)
    job = dramatiq.actor(lambda n: None, broker=broker, actor_name="past", queue_name="past")
    job.send_with_options(args=(1,), delay=-5_000)
    client = cluster.client(0)
    deadline = time.monotonic() + 10
    while client.backlog("past", "past").waiting < 1:  # due at once
        assert time.monotonic() < deadline
        time.sleep(0.05)
    broker.close()
    nowhere = HorologeBroker(["http://127.0.0.1:9"], CLIENT, retry_s=0)
    job = dramatiq.actor(lambda n: None, broker=nowhere, actor_name="lost", queue_name="lost")
    with pytest.raises(BrokerConnectionError, match="127.0.0.1:9"):
        job.send(1)
    nowhere.close()


def test_a_consumer_holding_its_prefetch_takes_no_more(cluster):
    """It pulled one more on every turn while its worker was busy, and so took the whole
    queue from the other workers (and now renews what it holds)."""
    import dramatiq

    from horologe.dramatiq import HorologeBroker

    broker = HorologeBroker([cluster.url(i) for i in cluster.indexes], CLIENT)
    job = dramatiq.actor(lambda n: None, broker=broker, actor_name="pf", queue_name="pf")
    for n in range(5):
        job.send(n)
    client = cluster.client(0)
    deadline = time.monotonic() + 10
    while client.backlog("pf", "pf").waiting < 5:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    consumer = broker.consume("pf", prefetch=2, timeout=200)
    taken = []
    while len(taken) < 2:
        assert time.monotonic() < deadline
        message = next(consumer)
        if message is not None:
            taken.append(message)
    for _ in range(5):  # the worker runs both: nothing more is pulled
        assert next(consumer) is None
    backlog = client.backlog("pf", "pf")
    assert (backlog.leased, backlog.waiting) == (2, 3), backlog
    consumer.ack(taken[0])
    assert next(consumer) is not None  # room for one again
    consumer.close()
    broker.close()


def test_a_worker_timeout_past_the_longest_long_poll_pulls_for_that_long(cluster):
    """Dramatiq's ``worker_timeout`` is how long a consumer waits for a message; one over
    the 30 s a pull may wait was sent as the pull's ``wait_ms``, which the node refuses
    (422): every pull failed, and the worker consumed nothing."""
    import dramatiq

    from horologe.dramatiq import HorologeBroker

    broker = HorologeBroker([cluster.url(i) for i in cluster.indexes], CLIENT)
    job = dramatiq.actor(lambda n: None, broker=broker, actor_name="long", queue_name="long")
    job.send(1)
    consumer = broker.consume("long", prefetch=1, timeout=60_000)
    message = next(consumer)
    assert message is not None and message.args == (1,)
    consumer.ack(message)
    consumer.close()
    broker.close()


def test_a_message_given_back_comes_again_marked_redelivered(cluster):
    """As the RabbitMQ broker's messages say it: ``redelivered`` once handed out before."""
    import dramatiq

    from horologe.dramatiq import HorologeBroker

    broker = HorologeBroker([cluster.url(i) for i in cluster.indexes], CLIENT)
    job = dramatiq.actor(lambda n: None, broker=broker, actor_name="rd", queue_name="rd")
    job.send(1)
    consumer = broker.consume("rd", prefetch=1, timeout=200)

    def taken():
        deadline = time.monotonic() + 10
        while (message := next(consumer)) is None:
            assert time.monotonic() < deadline
        return message

    first = taken()
    assert not first.redelivered
    consumer.requeue([first])
    again = taken()
    assert again.message_id == first.message_id and again.redelivered
    consumer.ack(again)
    consumer.close()
    broker.close()


def test_a_consumer_the_worker_restarts_takes_over_what_its_predecessor_handed_out(cluster):
    """Dramatiq's worker closes a consumer whose loop raised and makes a new one 3 s later.
    Here one pull raises (an error injected into the SDK's pull, the one fault not made
    real) as the only message starts, and it runs past the new consumer and two leases.
    The closed consumer's renewals stopped and the new one did not know the message: the
    lease ran out, the message ran again, and its ack raised KeyError."""
    import dramatiq

    from horologe.client import HorologeError
    from horologe.dramatiq import HorologeBroker

    broker = HorologeBroker([cluster.url(i) for i in cluster.indexes], CLIENT, visibility_ms=3_000)
    ran: list[int] = []
    failed = threading.Event()

    def slow(n: int) -> None:
        ran.append(n)
        time.sleep(7)  # past the consumer's restart (3 s) and two leases

    job = dramatiq.actor(slow, broker=broker, actor_name="restarted", queue_name="rs", max_retries=0)
    pull = broker.client.pull

    def pull_failing_once_it_runs(*args, **kw):
        if ran and not failed.is_set():
            failed.set()
            raise HorologeError("injected: the pull failed")
        return pull(*args, **kw)

    broker.client.pull = pull_failing_once_it_runs
    job.send(1)
    worker = dramatiq.Worker(broker, worker_threads=1, worker_timeout=200)
    worker.start()
    client = cluster.client(0)
    try:
        deadline = time.monotonic() + 30
        while not (failed.is_set() and client.backlog("rs", "rs").unacked == 0):
            assert time.monotonic() < deadline, (ran, client.backlog("rs", "rs"))
            time.sleep(0.1)
        time.sleep(4)  # past a lease: a copy handed out again would have run by now
    finally:
        worker.stop()
        broker.close()
    assert ran == [1]


def test_a_message_dramatiq_cannot_decode_goes_to_the_dlq_and_the_worker_runs_the_rest(
    cluster, tmp_path, monkeypatch
):
    """It raised out of the consumer, which the worker made anew 3 s later, and its lease
    was renewed for as long as the worker lived: never handed out again, nor dead-lettered."""
    client = cluster.client(0)
    bad = [client.produce("acc", body).id for body in ("{oops", '{"actor_name": "probe"}')]
    env, out = app_module(cluster, tmp_path, monkeypatch, "bad_dram", APP)
    worker = [sys.executable, "-m", "dramatiq", "bad_dram", "--processes", "1", "--threads", "2"]
    procs = start_workers([worker], env, str(tmp_path))
    try:
        import bad_dram

        for seq in range(3):
            bad_dram.probe.send(seq, time.time() * 1000)
        wait_executed(out, 3, 30)
        dead = dead_lettered(client, "acc", len(bad))
        wait_until(lambda: client.backlog("acc", "acc").unacked == 0, 10)
    finally:
        stop_workers(procs)
    assert sorted(r["id"] for r in executions(out)) == [0, 1, 2]
    assert sorted(m.id for m in dead) == sorted(bad)
    log = (tmp_path / "worker0.log").read_text()
    assert "Consumer encountered an unexpected error" not in log, log[-3000:]
    for message_id in bad:
        assert f"message {message_id} of acc" in log, log[-3000:]


def test_a_message_handed_out_again_while_the_worker_still_runs_it_is_acked_apart(
    cluster, tmp_path, monkeypatch
):
    """A worker frozen past its lease is handed its message again when it wakes (it may
    have died): both hand-outs are open at once under one message id. The consumer kept
    one receipt per message id, so the first ack took the second hand-out's receipt and the
    second ack raised KeyError (and the first receipt stayed held for good)."""
    env, out = app_module(
        cluster, tmp_path, monkeypatch, "frozen_dram", dramatiq_slow_app("acc", visibility_ms=2_000, run_s=6)
    )
    worker = [sys.executable, "-m", "dramatiq", "frozen_dram", "--processes", "1", "--threads", "2"]
    procs = start_workers([worker], env, str(tmp_path))
    try:
        import frozen_dram

        frozen_dram.slow.send(1)
        wait_executed(out, 1, 30)
        os.killpg(procs[0].pid, signal.SIGSTOP)
        time.sleep(4)  # past the lease: handed out again once the worker wakes
        os.killpg(procs[0].pid, signal.SIGCONT)
        wait_executed(out, 2, 30)
        client = cluster.client(0)
        wait_until(lambda: client.backlog("acc", "acc").unacked == 0, 30)
        time.sleep(7)  # the second run ends and is acked
    finally:
        stop_workers(procs)
    log = (tmp_path / "worker0.log").read_text()
    assert "post_process_message" not in log, log[-3000:]


def test_a_nack_to_the_dlq_goes_through_a_failover_and_keeps_its_lease_until_it_does(cluster):
    """The nack was never sent again once it might have applied: one sent as the master
    stopped answering raised (timed out), after the consumer had let the message's lease go,
    and Dramatiq's worker, trying it again, found the receipt gone (KeyError)."""
    import dramatiq

    from horologe.dramatiq import HorologeBroker

    urls = [cluster.url(i) for i in cluster.indexes]
    broker = HorologeBroker(urls, CLIENT, timeout=1.0, retry_s=30)
    job = dramatiq.actor(lambda n: None, broker=broker, actor_name="dl", queue_name="dl")
    job.send(1)
    job.send(2)
    consumer = broker.consume("dl", prefetch=2, timeout=200)
    taken = []
    deadline = time.monotonic() + 10
    while len(taken) < 2:
        assert time.monotonic() < deadline
        if (message := next(consumer)) is not None:
            taken.append(message)
    master = cluster.wait_leader()
    cluster.signal(master, signal.SIGSTOP)  # it takes the nack and never answers
    try:
        consumer.nack(taken[0])  # the SDK goes on to the next master
    finally:
        cluster.signal(master, signal.SIGCONT)
    assert consumer.leases.held() == 1
    for i in cluster.indexes:  # no node answers at all
        cluster.signal(i, signal.SIGSTOP)
    broker.client.retry_s = 2
    try:
        with pytest.raises(dramatiq.errors.ConnectionFailed, match="dead-letter"):
            consumer.nack(taken[1])  # Dramatiq's worker tries again later
    finally:
        for i in cluster.indexes:
            cluster.signal(i, signal.SIGCONT)
    assert consumer.leases.held() == 1  # still this worker's, renewed
    broker.client.retry_s = 30
    consumer.nack(taken[1])
    assert consumer.leases.held() == 0
    dead = dead_lettered(cluster.client(0), "dl", 2)
    assert sorted(dramatiq.Message.decode(m.body).args for m in dead) == [(1,), (2,)]
    consumer.close()
    broker.close()


def test_an_ack_no_node_took_is_sent_again_and_its_lease_kept_until_it_is(cluster):
    """An ack that no node took within the client's ``retry_s`` (the whole cluster
    unreachable a while) was logged and dropped, its lease let go before it was sent: the
    message was handed out again when its lease ended, and ran twice."""
    import dramatiq

    from horologe.dramatiq import HorologeBroker

    urls = [cluster.url(i) for i in cluster.indexes]
    broker = HorologeBroker(urls, CLIENT, timeout=0.5, retry_s=0.5, visibility_ms=6_000)
    job = dramatiq.actor(lambda n: None, broker=broker, actor_name="ak", queue_name="ak")
    job.send(1)
    consumer = broker.consume("ak", prefetch=1, timeout=200)
    deadline = time.monotonic() + 10
    while (message := next(consumer)) is None:
        assert time.monotonic() < deadline
    for i in cluster.indexes:  # no node answers: the ack fails after retry_s
        cluster.signal(i, signal.SIGSTOP)
    try:
        consumer.ack(message)
        time.sleep(3)  # the ack gave up; the lease (6 s from the pull) still stands
    finally:
        for i in cluster.indexes:
            cluster.signal(i, signal.SIGCONT)
    client = cluster.client(0)
    wait_until(lambda: client.backlog("ak", "ak").unacked == 0, 10)
    time.sleep(5)  # past the lease as pulled: an ack not sent would have it handed out again
    assert client.backlog("ak", "ak").waiting == 0
    assert consumer.leases.held() == 0
    consumer.close()
    broker.close()
