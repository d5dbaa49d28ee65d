"""Push delivery on a real 3-node cluster to a real aiohttp receiver on 127.0.0.1
(tests/integration/push_receiver.py), which checks every signature: 2xx acks, 500s and
timeouts retry under the message's id then dead-letter, Retry-After brings a retry
forward but never past its level, max_in_flight and rate_per_s hold as the receiver
counts them, and a SIGKILL of the master (or a release of it) mid-burst loses nothing
and repeats only what was not acked."""

from __future__ import annotations

import asyncio
import json
import signal
import time

import pytest
from click.testing import CliRunner

from horologe import cli
from horologe.client import AsyncClient, Client, InvalidRequestError, NotFoundError
from horologe.node.push.group import LEASE_MARGIN_MS
from testkit.process_cluster import ADMIN, CLIENT, Cluster
from testkit.waiting import wait_until

from .push_receiver import Receiver, Reply

SECRET = "push-secret-for-tests-0123"
ALLOW = 'push_allow = ["127.0.0.1/32"]\n'


@pytest.fixture
def receiver():
    made: list[Receiver] = []

    def make(answer=lambda push: Reply()) -> Receiver:
        made.append(Receiver(SECRET, answer).start())
        return made[-1]

    yield make
    for r in made:
        r.stop()


def client(cluster: Cluster) -> Client:
    return Client([cluster.url(i) for i in cluster.indexes], CLIENT, retry_s=20, timeout=10)


def produce(c: Client, topic: str, n: int, **options) -> list[str]:
    items = [{"topic": topic, "body": f"m{k}", **options} for k in range(n)]
    return [s.id for at in range(0, n, 1000) for s in c.produce_batch(items[at : at + 1000])]


def test_pushes_are_signed_acked_and_counted_and_bad_targets_refused(make_cluster, receiver):
    cluster = make_cluster(extra_toml=ALLOW)
    c = client(cluster)
    r = receiver()
    made = c.put_subscription("orders", "hooks", r.url, SECRET, max_in_flight=4)
    assert made.allowed and made.url == r.url and made.max_in_flight == 4 and made.tags == "*"
    raw = cluster.to_master("GET", "/v1/topics/orders/subscriptions/hooks", token=CLIENT).result()
    assert SECRET not in str(raw) and "secret" not in raw["push"]
    ids = produce(c, "orders", 30) + produce(c, "orders", 5, deliver_after="1s")
    wait_until(lambda: r.ids() >= set(ids), 30)
    wait_until(lambda: c.subscription("orders", "hooks").counters["delivered"] == 35, 10)
    got = r.got()
    assert len(got) == 35 and all(p.signed for p in got), [p for p in got if not p.signed]
    assert all(p.attempt == 0 and p.header_attempt == "0" and p.topic == "orders" for p in got)
    assert all(p.deliveries == 1 and p.header_deliveries == "1" for p in got)
    sub = c.subscription("orders", "hooks")
    assert sub.counters == {"delivered": 35, "retried": 0, "dead_lettered": 0, "in_flight": 0}
    assert sub.unacked == 0
    # a pull group of the same topic gets every message too, and the push group's are acked
    pulled = c.pull("orders", "pullers", max=100)
    assert {m.id for m in pulled} == set(ids)

    with pytest.raises(InvalidRequestError) as e:
        c.put_subscription("orders", "elsewhere", "http://10.1.2.3/hook", SECRET)
    assert (
        e.value.status == 422 and e.value.code == "push_target_not_allowed" and "push_allow" in str(e.value)
    )
    with pytest.raises(InvalidRequestError) as e:
        c.put_subscription("orders", "elsewhere", "ftp://127.0.0.1/hook", SECRET)
    assert e.value.status == 400 and e.value.field == "push.url"
    with pytest.raises(InvalidRequestError):
        c.put_subscription("orders", "elsewhere", r.url, "short")
    with pytest.raises(NotFoundError):
        c.subscription("orders", "elsewhere")

    c.delete_subscription("orders", "hooks")
    with pytest.raises(NotFoundError):
        c.subscription("orders", "hooks")
    produce(c, "orders", 3)
    c.pull("orders", "pullers", max=10, wait_ms=2000)  # delivered to the ready log by now
    assert len(r.got()) == 35  # nothing is pushed once deleted


def test_the_command_line_and_the_async_client(make_cluster, receiver):
    cluster = make_cluster(extra_toml=ALLOW)
    r = receiver()
    urls = ",".join(cluster.url(i) for i in cluster.indexes)
    common = ["--url", urls, "--token", CLIENT]
    run = CliRunner().invoke
    flags = [
        "--push-url",
        r.url,
        "--secret",
        SECRET,
        "--max-in-flight",
        "2",
        "--rate",
        "50",
        "--tags",
        "a||b",
    ]
    put = run(cli.main, ["subscription", "put", "jobs", "web", *common, *flags])
    assert put.exit_code == 0, put.output
    shown = json.loads(put.output)
    assert shown["url"] == r.url and shown["max_in_flight"] == 2 and shown["rate_per_s"] == 50
    assert shown["tags"] == "a||b" and SECRET not in put.output
    elsewhere = ["--push-url", "http://10.9.9.9/", "--secret", SECRET]
    refused = run(cli.main, ["subscription", "put", "jobs", "x", *common, *elsewhere])
    assert refused.exit_code == 1 and "push_allow" in refused.output
    c = client(cluster)
    ids = produce(c, "jobs", 2, tags=["a"]) + produce(c, "jobs", 2, tags=["c"])  # c: not for this group
    wait_until(lambda: r.ids() >= set(ids[:2]), 30)

    async def by_async_client() -> None:
        async with AsyncClient([cluster.url(i) for i in cluster.indexes], CLIENT, retry_s=20) as ac:
            sub = await ac.subscription("jobs", "web")
            assert sub.counters["delivered"] == 2 and sub.unacked == 0  # the filtered ones are skipped
            again = await ac.put_subscription(
                "jobs", "web", r.url, SECRET, max_in_flight=2, rate_per_s=50, tags="a||b"
            )
            assert again.created_at == sub.created_at
            await ac.delete_subscription("jobs", "web")
            with pytest.raises(NotFoundError):
                await ac.subscription("jobs", "web")

    # The master counts a push as delivered once its ack is applied and the ack's caller
    # has resumed, a few turns of its loop after ``unacked`` dropped: wait for both.
    wait_until(lambda: (s := c.subscription("jobs", "web")).counters["delivered"] == 2 and s.unacked == 0, 10)
    asyncio.run(by_async_client())
    assert r.ids() == set(ids[:2])
    assert run(cli.main, ["subscription", "put", "jobs", "web2", *common, *flags]).exit_code == 0
    deleted = run(cli.main, ["subscription", "delete", "jobs", "web2", *common])
    assert deleted.exit_code == 0 and deleted.output.strip() == "deleted jobs/web2"
    gone = run(cli.main, ["subscription", "get", "jobs", "web2", *common])
    assert gone.exit_code == 1 and "not_found" in gone.output


def test_max_in_flight_and_rate_hold_at_the_receiver(make_cluster, receiver):
    cluster = make_cluster(extra_toml=ALLOW)
    c = client(cluster)
    slow = receiver(lambda push: Reply(delay_s=0.05))
    c.put_subscription("burst", "slow", slow.url, SECRET, max_in_flight=3)
    ids = produce(c, "burst", 60)
    wait_until(lambda: slow.ids() >= set(ids), 60)
    assert slow.most_open == 3  # never more, and the pushes did overlap
    assert len(slow.got()) == 60

    paced = receiver()
    c.put_subscription("paced", "rated", paced.url, SECRET, rate_per_s=20, max_in_flight=50)
    ids = produce(c, "paced", 50)  # a hot second: all due at once
    wait_until(lambda: paced.ids() >= set(ids), 60)
    times = sorted(p.at for p in paced.got())
    # in any second, at most the rate plus the bucket (a tenth of a second's worth: 2) start,
    # and 2 more may arrive: started before the second, they reached the receiver within it
    most = max(sum(1 for t in times[k:] if t - start < 1.0) for k, start in enumerate(times))
    assert most <= 20 + 2 + 2, most


def test_a_steady_flow_is_pushed_at_its_times_never_before(make_cluster, receiver):
    """The wheel makes messages ready ahead of their time and the push group leases them
    ahead, some at a time; each is sent at its deliver time, by the master's clock (the
    receiver's, on this machine), and once."""
    cluster = make_cluster(extra_toml=ALLOW)
    c = client(cluster)
    r = receiver()
    c.put_subscription("flow", "hooks", r.url, SECRET, max_in_flight=64)
    start = int(time.time() * 1000) + 2_000
    items = [{"topic": "flow", "body": f"m{k}", "deliver_at": start + 3 * k} for k in range(400)]
    ids = [s.id for s in c.produce_batch(items)]
    wait_until(lambda: r.ids() >= set(ids), 30)
    got = r.got("flow")
    assert len(got) == 400 and {p.id for p in got} == set(ids)
    early = [(p.id, p.arrived_ms - p.deliver_at) for p in got if p.arrived_ms < p.deliver_at]
    assert not early, early


def test_failures_retry_then_dead_letter(make_cluster, receiver):
    cluster = make_cluster(extra_toml=ALLOW + "retry_levels_ms = [300, 300]\n")
    c = client(cluster)
    failing = receiver(lambda push: Reply(status=500))
    c.put_subscription("bad", "fails", failing.url, SECRET)
    # the first attempt of each times out, then it answers 200
    slow = receiver(lambda push: Reply(delay_s=3.0) if push.attempt == 0 else Reply())
    c.put_subscription("late", "times-out", slow.url, SECRET, timeout_ms=500)
    bad = produce(c, "bad", 5)
    late = produce(c, "late", 4)

    wait_until(lambda: c.subscription("bad", "fails").counters["dead_lettered"] == 5, 30)
    attempts = sorted((p.attempt, p.topic) for p in failing.got())
    assert (
        attempts == [(0, "bad")] * 5 + [(1, "bad")] * 5 + [(2, "bad")] * 5
    )  # two retry levels, then the DLQ
    assert c.subscription("bad", "fails").counters == {
        "delivered": 0,
        "retried": 10,
        "dead_lettered": 5,
        "in_flight": 0,
    }
    admin = Client([cluster.url(i) for i in cluster.indexes], CLIENT, admin_token=ADMIN, retry_s=20)
    peek = admin.request("GET", "/admin/dlq/fails", admin=True).body
    assert len(peek["messages"]) == 5 and all(m["topic"] == "bad" for m in peek["messages"])
    assert sorted(p.id for p in failing.got()) == sorted(bad * 3)  # a retry answers to its first's id

    wait_until(lambda: c.subscription("late", "times-out").counters["delivered"] == 4, 30)
    by_attempt = sorted(p.attempt for p in slow.got())
    assert by_attempt == [0] * 4 + [1] * 4
    # taken, then answered too late: the retry comes under the same id, for the receiver to drop
    assert sorted(p.id for p in slow.got()) == sorted(late * 2)
    assert c.subscription("late", "times-out").counters["retried"] == 4


def test_retry_after_brings_a_retry_forward_but_never_past_its_level(make_cluster, receiver):
    # the second level is ten minutes: a retry there within this test came by Retry-After
    cluster = make_cluster(extra_toml=ALLOW + "retry_levels_ms = [300, 600000]\n")
    c = client(cluster)

    def answer(push) -> Reply:
        if push.attempt == 0:
            return Reply(status=429, retry_after="3600")  # an hour: held to the first level, 300 ms
        if push.attempt == 1:
            return Reply(status=503, retry_after="0")  # brought forward from ten minutes
        return Reply()

    r = receiver(answer)
    c.put_subscription("busy", "polite", r.url, SECRET)
    ids = produce(c, "busy", 3)
    wait_until(lambda: c.subscription("busy", "polite").counters["delivered"] == 3, 30)
    assert sorted(p.attempt for p in r.got()) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert {p.id for p in r.got() if p.attempt == 0} == set(ids)


@pytest.mark.parametrize("how", ["sigkill", "release"])
def test_a_master_lost_mid_burst_loses_nothing_and_repeats_only_unacked(make_cluster, receiver, how):
    cluster = make_cluster(extra_toml=ALLOW)
    c = client(cluster)
    r = receiver(lambda push: Reply(delay_s=0.01))
    in_flight = 8
    c.put_subscription("burst", "hooks", r.url, SECRET, max_in_flight=in_flight, rate_per_s=400)
    ids = produce(c, "burst", 2000)
    wait_until(lambda: len(r.got()) >= 300, 30)
    old = cluster.wait_leader()
    if how == "sigkill":
        cluster.signal(old, signal.SIGKILL)
        before = len(r.got())  # what came before the old master stopped pushing
    else:
        before = len(r.got())
        assert cluster.client(old).release_master()["new_master"] != f"n{old + 1}"
    cluster.wait_leader([i for i in cluster.indexes if i != old], exclude=old)
    wait_until(lambda: r.ids() >= set(ids), 120)
    got = [p.id for p in r.got()]
    assert set(got) == set(ids)  # nothing lost
    assert before < len(ids)  # the kill came mid-burst
    first = got[:before]
    assert len(first) == len(set(first))  # no repeat before the kill
    repeats = len(got) - len(set(got))
    # only what was open, or answered and not yet acked, at the kill: a request's slot is
    # held until its ack is committed, so at most max_in_flight of them. A release lets the
    # requests open end and acks what was answered before it hands over: none.
    assert repeats <= (in_flight if how == "sigkill" else 0), repeats
    # Each push says how often its message was handed out: a repeat says so (its lease
    # ended unacked, a count replicated with the leases), the pushes before the kill did
    # not; the header says what the body says.
    pushes = r.got()
    assert all(str(p.deliveries) == p.header_deliveries for p in pushes)
    assert {p.deliveries for p in pushes[:before]} == {1}
    seen: set[str] = set()
    for p in pushes:
        assert p.id not in seen or p.deliveries >= 2, p
        seen.add(p.id)
    if how == "sigkill":
        cluster.start(old)
        cluster.catch_up(old)
    # The last pushes reached the receiver before their acks were committed: pushed again
    # once their lease (replicated) ends, then acked. Wait for those.
    wait_until(lambda: c.subscription("burst", "hooks").unacked == 0, (10_000 + LEASE_MARGIN_MS) / 1000 + 20)
    print(f"{how}: {len(ids)} pushed, {before} before, {repeats} sent again")
