"""Celery on Horologe, as a user runs it: two prefork workers (``celery worker``, early acks,
prefetch 4 × concurrency) on a 3-node cluster; tasks sent with countdowns and sub-second
etas; the master released, then SIGKILLed, while they wait and fall due. Every task runs
once, none early, and no worker holds a task before its time."""

from __future__ import annotations

import contextlib
import logging
import random
import signal
import socket
import sys
import textwrap
import time
from datetime import UTC, datetime

import pytest

from testkit.process_cluster import CLIENT
from testkit.task_queues import (
    CELERY_PROBE_APP,
    app_module,
    celery_broker,
    dead_lettered,
    executions,
    faults,
    held_early,
    received,
    start_celery,
    start_workers,
    stop_workers,
    verdict,
    wait_executed,
)
from testkit.waiting import wait_until

N = 240
# The probe app with tasks that replace themselves (``Task.replace``): ``swap`` by a probe,
# ``swap_twice`` by a swap; each writes its run down as the probe does.
REPLACING_APP = CELERY_PROBE_APP + textwrap.dedent(
    """

    @app.task(bind=True)
    def swap(self, seq):
        _write("jsonl", {"id": self.request.id, "task": "swap", "seq": seq})
        return self.replace(probe.s(seq, False))


    @app.task(bind=True)
    def swap_twice(self, seq):
        _write("jsonl", {"id": self.request.id, "task": "swap_twice", "seq": seq})
        return self.replace(swap.s(seq))
    """
)
# Leases of 10 s (tasks take milliseconds): a task whose pull answer was lost some way the
# named pulls do not cover still runs within the 90 s the test waits.
RETRIED = 20  # tasks that retry once, 2 s later: a retry is a message of its own


def test_celery_tasks_run_once_on_time_across_a_release_and_a_sigkilled_master(
    cluster, tmp_path, monkeypatch
):
    broker = celery_broker(cluster)
    env, out = app_module(
        cluster, tmp_path, monkeypatch, "acc_app", CELERY_PROBE_APP, BROKER=broker, VISIBILITY_S="10"
    )
    worker = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "acc_app",
        "worker",
        "--pool",
        "prefork",
        "-c",
        "2",
        "--without-heartbeat",
        "--without-mingle",
        "--without-gossip",
        "-l",
        "info",
    ]
    procs = start_workers([[*worker, "-n", f"w{k}@%h"] for k in range(2)], env, str(tmp_path))
    try:
        import acc_app

        rng = random.Random(5)
        produced: dict[tuple[str, int], int] = {}
        now_ms = time.time() * 1000
        hot_ms = int(now_ms) + 4_000  # a hot second: a fifth of the tasks due in one ms
        for seq in range(N):
            eta_ms = hot_ms if seq % 5 == 0 else int(now_ms + rng.uniform(1_500, 7_000)) + rng.random()
            retry = seq < RETRIED
            eta = datetime.fromtimestamp(eta_ms / 1000, UTC)
            task = acc_app.probe.apply_async((seq, retry), eta=eta)
            produced[(task.id, 0)] = eta_ms
            if retry:
                produced[(task.id, 1)] = eta_ms + 2_000  # at the earliest
        chaos = faults(cluster, (2.0, 4.5))
        wait_executed(out, len(produced), 90)
        chaos.join(30)
        time.sleep(2)  # anything run twice would show by now
    finally:
        stop_workers(procs)
    v = verdict(executions(out), produced)
    held = held_early(out, 50)
    print(f"celery: {len(produced)} executions, lateness p50 {v.p(0.5):.1f} ms, p99 {v.p(0.99):.1f} ms")
    assert v.twice == [], "a task ran twice"
    assert v.lost == [], "a task never ran"
    assert v.early == [], "a task started before its eta"
    assert held == [], "a worker was handed a task before its time"


def _app(cluster, monkeypatch, name: str):
    """A Celery app on the cluster whose default queue is ``name``, sending from here."""
    from celery import Celery

    import horologe.kombu  # noqa: F401 - registers the transport

    monkeypatch.setenv("HOROLOGE_CLIENT_TOKEN", CLIENT)
    app = Celery(name, broker=celery_broker(cluster))
    app.conf.task_default_queue = name
    return app


def _got(channel, queue: str):
    """The message ``basic_get`` takes from ``queue`` once one is due (at the wheel's next tick)."""
    deadline = time.monotonic() + 10
    while (message := channel.basic_get(queue)) is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return message


def test_revoke_scheduled_cancels_a_waiting_task_with_no_worker_running(cluster, monkeypatch):
    import horologe.kombu

    app = _app(cluster, monkeypatch, "rv")
    task = app.send_task("rv.later", countdown=60)
    assert horologe.kombu.revoke_scheduled(app, task.id) is True
    assert horologe.kombu.revoke_scheduled(app, task.id) is True  # cancelled, as before
    assert horologe.kombu.revoke_scheduled(app, "no-such-task") is False
    assert list(cluster.client(0).pending("rv").messages) == []


def test_revoke_scheduled_cancels_the_retry_that_waits_of_a_task_that_ran(cluster, monkeypatch):
    """It tried attempt 0 alone, and said a task whose retry waited out its countdown was
    already delivered."""
    import horologe.kombu
    from horologe.client import AlreadyDeliveredError

    app = _app(cluster, monkeypatch, "rr")
    client = cluster.client(0)
    for task_id in ("retried", "ran-once"):  # attempt 0 of each handed to a worker and acked
        client.produce("rr", "{}", key=f"celery:{task_id}:0")
    handed = []
    deadline = time.monotonic() + 10
    while len(handed) < 2:
        assert time.monotonic() < deadline
        batch = client.pull("rr", "rr", max=10, wait_ms=500)
        if batch:
            client.ack("rr", "rr", batch.receipts())
        handed += batch
    client.produce("rr", "{}", key="celery:retried:1", deliver_after=60_000)  # its retry, 60 s later
    assert horologe.kombu.revoke_scheduled(app, "retried") is True
    assert horologe.kombu.revoke_scheduled(app, "retried") is True  # cancelled, as before
    assert list(client.pending("rr").messages) == []
    with pytest.raises(AlreadyDeliveredError):
        horologe.kombu.revoke_scheduled(app, "ran-once")  # ran, and no retry of it waits
    with pytest.raises(AlreadyDeliveredError):
        horologe.kombu.revoke_scheduled(app, "retried", retries=0)  # that attempt, as asked


def test_remote_control_says_it_was_dropped_and_names_what_cancels(cluster, monkeypatch, caplog):
    """app.control.revoke returned None and the task still ran, without a word."""
    app = _app(cluster, monkeypatch, "rc")
    task = app.send_task("rc.later", countdown=60)
    with caplog.at_level(logging.WARNING, logger="horologe.kombu.transport"):
        app.control.revoke(task.id)
        app.control.revoke(task.id)
    said = [r.getMessage() for r in caplog.records if "fanout exchange" in r.getMessage()]
    assert len(said) == 1 and "horologe.kombu.revoke_scheduled(app, task_id)" in said[0], said
    assert [m.key for m in cluster.client(0).pending("rc").messages] == [f"celery:{task.id}:0"]  # not revoked


def test_celery_purge_drops_the_due_tasks_waiting_and_keeps_the_scheduled_ones(cluster, monkeypatch):
    app = _app(cluster, monkeypatch, "pg")
    client = cluster.client(0)
    for _ in range(5):
        app.send_task("pg.now")
    later = app.send_task("pg.later", countdown=60)
    deadline = time.monotonic() + 10
    while client.backlog("pg", "pg").waiting < 5:  # due tasks reach the ready log at the wheel's next tick
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with app.connection_for_write() as conn:
        assert conn.default_channel.queue_declare("pg", passive=True).message_count == 5  # kombu's _size
    assert app.control.purge() == 5  # what `celery purge` calls
    assert client.backlog("pg", "pg").waiting == 0
    assert client.pull("pg", "pg", max=10) == []  # no worker will get them
    assert [m.key for m in client.pending("pg").messages] == [f"celery:{later.id}:0"]  # still scheduled


def test_basic_get_takes_one_message_and_no_ack_takes_it_for_good(cluster, monkeypatch):
    """kombu's basic_get (SimpleQueue.get_nowait, the rpc:// result backend's look at a
    queue) raised the transport's NotImplementedError; and what a no_ack consumer took
    stayed leased, to be handed out again when the lease ended."""
    app = _app(cluster, monkeypatch, "bg")
    client = cluster.client(0)
    with app.connection_for_write() as conn:
        queue = conn.SimpleQueue("bg")
        queue.put({"n": 1})
        queue.put({"n": 2})
        channel = conn.default_channel
        taken = []
        deadline = time.monotonic() + 10
        while len(taken) < 2:  # due at the wheel's next tick
            assert time.monotonic() < deadline
            message = channel.basic_get("bg", no_ack=bool(taken))  # the second: no_ack
            if message is None:
                time.sleep(0.05)
                continue
            taken.append(message)
        taken[0].ack()
        assert sorted(m.decode()["n"] for m in taken) == [1, 2]
        deadline = time.monotonic() + 10
        while client.backlog("bg", "bg").unacked:  # both acked: the no_ack one at once
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert channel.basic_get("bg") is None
        queue.close()


def test_what_a_pull_took_for_a_consumer_cancelled_meanwhile_is_given_back(cluster, monkeypatch):
    """kombu gave such messages back through the connection's first channel: the channel
    that pulled them kept their leases, renewing released leases for as long as it lived."""
    app = _app(cluster, monkeypatch, "gb")
    client = cluster.client(0)
    for _ in range(3):
        app.send_task("gb.now")
    deadline = time.monotonic() + 10
    while client.backlog("gb", "gb").waiting < 3:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with app.connection_for_write() as conn:
        assert conn.default_channel is not None  # the first channel: kombu's for rejects
        channel = conn.channel()
        channel.basic_consume("gb", False, lambda message: None, "tag")
        channel.basic_cancel("tag")  # cancelled while its pull was under way
        channel._get_many(["gb"], timeout=1)
        backlog = client.backlog("gb", "gb")
        assert (backlog.leased, backlog.waiting) == (0, 3), backlog
        assert channel.leases.held() == 0


def test_a_message_that_is_no_kombu_message_goes_to_the_dlq_and_the_worker_runs_the_rest(
    cluster, tmp_path, monkeypatch
):
    """A body that was not JSON, not a JSON object, or not a kombu message raised out of the
    transport's fetch: the worker died, and the batch it gave back killed the next worker."""
    client = cluster.client(0)
    bad = {
        "not json": "{oops",
        "not an object": "[1, 2]",
        "not a kombu message": '{"properties": 7}',
        "a body base64 does not decode": '{"body": "abc", "properties": {"body_encoding": "base64"}}',
    }
    ids = {client.produce("acc", body).id: why for why, body in bad.items()}
    procs, out = start_celery(cluster, tmp_path, monkeypatch, "bad_app", CELERY_PROBE_APP, visibility_s=10)
    try:
        import bad_app

        for seq in range(3):
            bad_app.probe.delay(seq, False)
        wait_executed(out, 3, 30)
        dead = dead_lettered(client, "acc", len(bad))
        assert procs[0].poll() is None, "the worker died"
    finally:
        stop_workers(procs)
    assert sorted(r["seq"] for r in executions(out)) == [0, 1, 2]
    assert {m.id for m in dead} == set(ids)
    assert client.backlog("acc", "acc").unacked == 0
    log = (tmp_path / "worker0.log").read_text()
    for message_id in ids:
        assert f"message {message_id} of acc" in log, log[-3000:]


def test_basic_get_passes_over_a_message_that_is_no_kombu_message_to_the_dlq(cluster, monkeypatch):
    """basic_get raised on it, and gave it back: every later look at the queue met it again."""
    app = _app(cluster, monkeypatch, "gx")
    client = cluster.client(0)
    (bad,) = [client.produce("gx", "{oops").id]
    with app.connection_for_write() as conn:
        queue = conn.SimpleQueue("gx")
        queue.put({"n": 1})
        channel = conn.default_channel
        deadline = time.monotonic() + 10
        while client.backlog("gx", "gx").waiting < 2:  # both due at the wheel's next tick
            assert time.monotonic() < deadline
            time.sleep(0.05)
        message = channel.basic_get("gx")
        assert message is not None and message.decode() == {"n": 1}
        message.ack()
        assert channel.basic_get("gx") is None
        queue.close()
    assert [m.id for m in client.pull("%DLQ%gx", "gx", max=10, wait_ms=2_000)] == [bad]


def test_a_task_replaced_by_another_runs_the_replacement_once(cluster, tmp_path, monkeypatch):
    """``Task.replace`` sends the replacement under the task's id, retries 0: its key was the
    replaced task's, so the cluster took it for a resend of that publish and the
    replacement never ran."""
    procs, out = start_celery(cluster, tmp_path, monkeypatch, "rp_app", REPLACING_APP, visibility_s=10)
    try:
        import rp_app

        once = rp_app.swap.delay(1).id
        twice = rp_app.swap_twice.delay(2).id
        wait_executed(out, 5, 30)  # swap, probe; swap_twice, swap, probe
        time.sleep(1)  # anything run twice would show by now
    finally:
        stop_workers(procs)
    runs = sorted((r["id"], r.get("task", "probe")) for r in executions(out))
    assert runs == sorted(
        [(once, "swap"), (once, "probe"), (twice, "swap_twice"), (twice, "swap"), (twice, "probe")]
    )


def test_revoke_scheduled_cancels_the_replacement_that_waits(cluster, monkeypatch):
    """A task replaced by one with a countdown: its replacement waits under the same id."""
    import horologe.kombu

    app = _app(cluster, monkeypatch, "rw")
    client = cluster.client(0)
    client.produce("rw", "{}", key="celery:swapped:0")  # handed to a worker and acked
    deadline = time.monotonic() + 10
    while not (batch := client.pull("rw", "rw", max=10, wait_ms=500)):
        assert time.monotonic() < deadline
    client.ack("rw", "rw", batch.receipts())
    client.produce("rw", "{}", key="celery:swapped:0:r1", deliver_after=60_000)  # its replacement
    assert horologe.kombu.revoke_scheduled(app, "swapped") is True
    assert list(client.pending("rw").messages) == []


def test_a_reject_to_the_dlq_goes_through_a_failover(cluster, monkeypatch):
    """The nack was never sent again once it might have applied: a reject sent as the master
    stopped answering raised (timed out, after the client's 10 s), the lease let go first."""
    app = _app(cluster, monkeypatch, "rj")
    with app.connection_for_write() as conn:
        queue = conn.SimpleQueue("rj")
        queue.put({"n": 1})
        channel = conn.default_channel
        message = _got(channel, "rj")
        master = cluster.wait_leader()
        cluster.signal(master, signal.SIGSTOP)  # it takes the nack and never answers
        try:
            message.reject()  # the SDK goes on to the next master
        finally:
            cluster.signal(master, signal.SIGCONT)
        assert channel.leases.held() == 0
        queue.close()
    (dead,) = dead_lettered(cluster.client(0), "rj", 1)
    assert dead.id == message.delivery_info["horologe"]["id"]


def test_a_celery_retry_is_a_message_of_its_own_and_not_redelivered(cluster, tmp_path, monkeypatch):
    """``self.retry()`` publishes a new message: handed out for the first time, it is not
    ``redelivered`` (as on kombu's Redis transport), so a deduplicating worker runs it."""
    procs, out = start_celery(cluster, tmp_path, monkeypatch, "rt_app", CELERY_PROBE_APP, visibility_s=10)
    try:
        import rt_app

        task = rt_app.probe.delay(1, True)  # retries once, 2 s later
        wait_executed(out, 2, 30)
    finally:
        stop_workers(procs)
    runs = sorted((r["id"], r["attempt"], r["redelivered"]) for r in executions(out))
    assert runs == [(task.id, 0, False), (task.id, 1, False)]


def test_a_task_sent_to_an_exchange_no_queue_here_is_bound_to_is_refused_not_dropped(cluster, monkeypatch):
    """Routed by exchange and routing key (``task_routes``), to a queue only the workers
    declare: kombu finds no binding in the sending process (this transport keeps none in
    the cluster, as Redis keeps them in Redis), and the task vanished without a word."""
    import horologe.kombu

    app = _app(cluster, monkeypatch, "ex")
    with pytest.raises(Exception, match="media") as refused:
        app.send_task("ex.video", exchange="media", routing_key="media.video")
    assert isinstance(refused.value, horologe.kombu.UnroutableError)
    # declared here, it is routed: the queue's topic gets it
    from kombu import Exchange, Queue

    app.conf.task_queues = [Queue("video", Exchange("media", "topic"), "media.#")]
    app.send_task("ex.video", queue=app.amqp.queues["video"], countdown=60)
    assert len(cluster.client(0).pending("video").messages) == 1


# The probe app with ``slow(seq)``: writes its start down, then takes 0.3 s.
SLOW_APP = CELERY_PROBE_APP + textwrap.dedent(
    """

    @app.task(bind=True)
    def slow(self, seq):
        _write("jsonl", {"id": self.request.id, "attempt": 0, "seq": seq, "eta_ms": _eta_ms(self.request),
                         "start_ms": time.time() * 1000})
        time.sleep(0.3)
    """
)


def test_a_worker_holds_no_more_tasks_that_fell_due_than_its_prefetch(cluster, tmp_path, monkeypatch):
    """A task handed out is due, yet it came with its eta: Celery takes any task with an
    eta past its prefetch limit (it schedules it, and raises the limit by one while it
    waits), and a prefork worker whose processes were busy went on pulling, holding all
    that fell due while the other workers had none."""
    env, out = app_module(
        cluster, tmp_path, monkeypatch, "pf_app", SLOW_APP, BROKER=celery_broker(cluster), VISIBILITY_S="30"
    )
    worker = [sys.executable, "-m", "celery", "-A", "pf_app", "worker", "--pool", "prefork", "-c", "1"]
    worker += ["--prefetch-multiplier", "1", "--without-heartbeat", "--without-mingle", "--without-gossip"]
    procs = start_workers([worker], env, str(tmp_path))
    try:
        import pf_app

        eta = datetime.fromtimestamp(time.time() + 4, UTC)
        ids = [pf_app.slow.apply_async((seq,), eta=eta).id for seq in range(20)]
        wait_executed(out, len(ids), 60)
    finally:
        stop_workers(procs)
    started = {r["id"]: r["start_ms"] for r in executions(out)}
    got = sorted(r["received_ms"] for r in received(out))
    # waiting in the worker as each one came: received, not started
    waiting = [sum(1 for t in got if t <= at) - sum(1 for s in started.values() if s <= at) for at in got]
    assert sorted(started) == sorted(ids)
    assert max(waiting) <= 3, waiting  # the prefetch (1), the one a pull brings, one more
    assert all(r["start_ms"] >= r["eta_ms"] for r in executions(out))


def test_leases_stay_renewed_while_a_worker_that_stopped_consuming_finishes_its_tasks(cluster, monkeypatch):
    """A warm shutdown: Celery cancels its task consumer, then waits for the tasks that
    run (its loop silent), and only then closes the channel. The keeper took the silence
    for a stuck loop and stopped renewing: a long acks_late task went to another worker
    while it still ran."""
    from kombu import Consumer, Queue

    app = _app(cluster, monkeypatch, "ws")
    app.send_task("ws.long")
    got = []
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        consumer = Consumer(
            channel, queues=[Queue("ws")], callbacks=[lambda body, message: got.append(message)]
        )
        consumer.consume()
        deadline = time.monotonic() + 10
        while not got:
            assert time.monotonic() < deadline
            with contextlib.suppress(TimeoutError, socket.timeout):
                conn.drain_events(timeout=0.5)
        consumer.cancel()  # the warm shutdown begins; the task runs on
        later = time.monotonic() + 3_600  # an hour of the loop's silence
        monkeypatch.setattr(channel.leases, "_clock", lambda: later)
        assert channel.leases.renew() == 1
        got[0].ack()


def test_a_task_with_headers_kombu_can_encode_is_sent(cluster, monkeypatch):
    """A header of a datetime, a UUID or a Decimal: kombu's JSON encodes them (its Redis
    transport sends such a task); the standard library's raised TypeError."""
    import uuid
    from decimal import Decimal

    app = _app(cluster, monkeypatch, "hd")
    headers = {"sent_at": datetime.now(UTC), "trace": uuid.uuid4(), "price": Decimal("9.99")}
    app.send_task("hd.x", headers=headers, countdown=60)
    assert len(cluster.client(0).pending("hd").messages) == 1


def test_an_ack_no_node_took_is_sent_again_and_its_lease_kept_until_it_is(cluster, monkeypatch):
    """An ack that no node took within the client's ``retry_s`` (the whole cluster
    unreachable a while) was logged and dropped, its lease let go before it was sent: the
    task was handed out again when its lease ended, and ran twice."""
    app = _app(cluster, monkeypatch, "ak")
    # A frozen node fails a call after 0.5 s, not 10; then no other is tried.
    app.conf.broker_transport_options = {"visibility_timeout": 6, "timeout": 0.5, "retry_s": 0.5}
    client = cluster.client(0)
    with app.connection_for_write() as conn:
        queue = conn.SimpleQueue("ak")
        queue.put({"n": 1})
        channel = conn.default_channel
        message = _got(channel, "ak")
        for i in cluster.indexes:  # no node answers: the ack fails after retry_s
            cluster.signal(i, signal.SIGSTOP)
        try:
            message.ack()
            time.sleep(3)  # the ack gave up; the lease (6 s from the pull) still stands
        finally:
            for i in cluster.indexes:
                cluster.signal(i, signal.SIGCONT)
        wait_until(lambda: client.backlog("ak", "ak").unacked == 0, 10)
        time.sleep(5)  # past the lease as pulled: an ack not sent would have it handed out again
        assert client.backlog("ak", "ak").waiting == 0
        assert channel.leases.held() == 0
        queue.close()
