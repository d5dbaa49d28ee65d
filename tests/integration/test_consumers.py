"""Consumers on a real cluster, through the client SDK: groups, leases, retries, DLQ, filters."""

from __future__ import annotations

import asyncio
import signal
import threading
import time

import pytest

from horologe.client import AlreadyDeliveredError, AsyncClient, Client, calls, core
from testkit.process_cluster import CLIENT

from .load import wait_delivered

SHORT_RETRIES = "retry_levels_ms = [300, 300]\n"


def client(cluster) -> Client:
    return Client([cluster.url(i) for i in cluster.indexes], CLIENT, retry_s=20)


def drain(c: Client, topic: str, group: str, *, tags=None, idle_s: float = 1.5, ack: bool = True) -> list:
    """Pull and ack until nothing arrives for ``idle_s``; returns the messages seen."""
    seen, quiet_since = [], time.monotonic()
    while time.monotonic() - quiet_since < idle_s:
        batch = c.pull(topic, group, tags=tags, max=100, wait_ms=300)
        if batch:
            quiet_since = time.monotonic()
            seen += batch
            if ack:
                c.ack(topic, group, [m.receipt for m in batch])
    return seen


def test_groups_share_or_each_get_everything(cluster):
    c = client(cluster)
    ids = {s.id for s in c.produce_batch([{"topic": "orders", "body": f"o{k}"} for k in range(60)])}
    a1 = c.pull("orders", "billing", max=30, wait_ms=3_000)
    a2 = c.pull("orders", "billing", max=100, wait_ms=1_000)  # a second consumer of the group
    assert {m.id for m in a1}.isdisjoint({m.id for m in a2})
    assert c.ack("orders", "billing", [m.receipt for m in a1 + a2]) == 60  # each message once
    assert {m.id for m in a1 + a2} == ids
    other = drain(c, "orders", "audit")  # an independent group gets everything too
    assert {m.id for m in other} == ids
    assert c.pull("orders", "billing", max=10, wait_ms=300) == []  # acked: never again


def test_lease_expiry_redelivers(cluster):
    c = client(cluster)
    c.produce("jobs", "run me")
    leased = time.monotonic()  # the lease starts after this
    (first,) = c.pull("jobs", "workers", wait_ms=3_000, visibility_ms=500)
    assert c.pull("jobs", "workers", wait_ms=0) == []  # leased to the first consumer
    # A long poll rescans as leases run out, so it returns once the 500 ms lease is over.
    (again,) = c.pull("jobs", "workers", wait_ms=5_000)
    assert time.monotonic() - leased >= 0.5, "handed out again before its lease ran out"
    assert again.id == first.id and again.receipt != first.receipt
    c.ack("jobs", "workers", [again.receipt])


def test_message_being_acked_is_not_handed_out_meanwhile(cluster):
    """Acks commit in windows of 50 ms; until then the lease must still hold the message."""
    c, other = client(cluster), client(cluster)
    c.produce_batch([{"topic": "acking", "body": f"a{k}"} for k in range(40)])
    wait_delivered(cluster)
    handed_twice = []
    for _ in range(20):
        (m,) = c.pull("acking", "g", max=1, wait_ms=3_000)
        acker = threading.Thread(target=c.ack, args=("acking", "g", [m.receipt]))
        acker.start()
        while acker.is_alive():
            probe = other.pull("acking", "g", max=100, visibility_ms=100)  # never acked
            handed_twice += [x.id for x in probe if x.id == m.id]
        acker.join()
    assert handed_twice == []


def test_nack_retries_then_dead_letters(make_cluster):
    cluster = make_cluster(extra_toml=SHORT_RETRIES)
    c = client(cluster)
    sent = c.produce("pay", "charge card", tags=["card"])
    attempts = []
    deadline = time.monotonic() + 20
    while len(attempts) < 3 and time.monotonic() < deadline:
        for m in c.pull("pay", "charger", wait_ms=1_000):
            attempts.append(m.attempt)
            assert m.topic == "pay" and m.tags == ("card",)
            c.nack("pay", "charger", [m.receipt])
    assert attempts == [0, 1, 2]  # the first delivery, then one per retry level
    (dead,) = c.pull("%DLQ%charger", "charger", wait_ms=3_000)
    assert dead.text == "charge card" and dead.attempt == 2
    c.ack("%DLQ%charger", "charger", [dead.receipt])
    assert c.pull("pay", "charger", wait_ms=1_000) == [] and sent.id
    assert c.pull("%DLQ%charger", "charger", wait_ms=300) == []


def test_tag_filter_skips_for_that_group(cluster):
    c = client(cluster)
    c.produce_batch(
        [
            {"topic": "ev", "body": f"{k}", "tags": [["red"], ["blue"], ["red", "green"], []][k % 4]}
            for k in range(40)
        ]
    )
    reds = drain(c, "ev", "g-red", tags="red")
    assert len(reds) == 20 and all("red" in m.tags for m in reds)
    either = drain(c, "ev", "g-either", tags="blue||green")
    assert len(either) == 20 and all({"blue", "green"} & set(m.tags) for m in either)
    assert len(drain(c, "ev", "g-all", tags="*")) == 40


def test_failover_during_consumption(cluster):
    c = client(cluster)
    ids = {s.id for s in c.produce_batch([{"topic": "f", "body": f"{k}"} for k in range(40)])}
    acked = c.pull("f", "g", max=15, wait_ms=3_000)
    assert len(acked.receipts()) == 1  # the pull's batch receipt names all 15
    c.ack("f", "g", acked.receipts())
    leased = c.pull("f", "g", max=10, wait_ms=1_000, visibility_ms=4_000)  # leased, never acked
    lease_ends = time.monotonic() + 4.0  # at the latest (the lease started before the answer)
    assert len(acked) == 15 and len(leased) == 10
    master = cluster.wait_leader()
    cluster.signal(master, signal.SIGKILL)
    cluster.wait_leader([i for i in cluster.indexes if i != master], exclude=master)
    leased_ids, rest, early = {m.id for m in leased}, [], []
    while time.monotonic() < lease_ends + 3.0:
        batch = c.pull("f", "g", max=100, wait_ms=300)
        if time.monotonic() < lease_ends - 0.5:  # the answer came before the lease could end
            early += [m.id for m in batch if m.id in leased_ids]
        if batch:
            c.ack("f", "g", batch.receipts())
        rest += batch
    rest_ids = [m.id for m in rest]
    assert not {m.id for m in acked} & set(rest_ids), "an acked message came back"
    assert early == [], "handed out again before its lease ended"
    assert {m.id for m in leased} <= set(rest_ids), "an unacked lease was not handed out again after it ended"
    assert {m.id for m in acked} | set(rest_ids) == ids and len(rest_ids) == len(set(rest_ids))


def test_idempotent_produce_and_cancel_through_the_sdk(cluster):
    c = client(cluster)
    first = c.produce("o", "x", key="order-9", deliver_after="1h")
    assert c.produce("o", "x again", key="order-9", deliver_after="1h").id == first.id
    c.cancel(first.id)
    assert c.status(first.id).state == "cancelled"
    now = c.produce("o", "now")
    drain(c, "o", "g")
    with pytest.raises(AlreadyDeliveredError):
        c.cancel(now.id)


def test_a_produce_whose_key_names_a_message_answers_that_messages_time(cluster):
    """The answer gave the time asked for, though nothing new was stored: a message at
    +1 h, produced again with its key for +10 s, said +10 s and came at +1 h."""
    c = client(cluster)
    first = c.produce("o", "x", key="order-10", deliver_after="1h")
    again = c.produce("o", "x again", key="order-10", deliver_after="10s")
    assert (again.id, again.deliver_at) == (first.id, first.deliver_at)
    moved = first.deliver_at + 60_000
    c.reschedule(first.id, deliver_at=moved)
    (res,) = c.produce_batch([{"topic": "o", "body": "x", "key": "order-10", "deliver_after": "10s"}])
    assert (res.id, res.deliver_at) == (first.id, moved)
    c.cancel(first.id)
    mixed = c.produce_batch(
        [
            {"topic": "o", "body": "x", "key": "order-10"},
            {"topic": "o", "body": "y", "key": "order-11", "deliver_after": "2h"},
        ]
    )
    assert (mixed[0].id, mixed[0].deliver_at) == (first.id, moved)  # the cancelled one's own time
    assert mixed[1].id != first.id and mixed[1].deliver_at == c.status(mixed[1].id).deliver_at
    # a key twice in one batch: stored once, and both answered by the first one's time
    twice = c.produce_batch(
        [
            {"topic": "o", "body": "a", "key": "order-12", "deliver_after": "3h"},
            {"topic": "o", "body": "b", "key": "order-12", "deliver_after": "4h"},
        ]
    )
    assert twice[0].id == twice[1].id and twice[0].deliver_at == twice[1].deliver_at
    assert c.status(twice[0].id).deliver_at == twice[0].deliver_at


def test_keyed_produces_sharing_entries_each_answer_their_own_message(cluster):
    """Many callers at once share P entries (group commit): each answer's id and time
    are its own message's, whichever position its items took in the entry."""
    from concurrent.futures import ThreadPoolExecutor

    c = client(cluster)
    firsts = [c.produce("share", f"m{k}", key=f"s{k}", deliver_after=f"{k + 1}h") for k in range(8)]

    def again(k: int):
        return c.produce_batch(
            [{"topic": "share", "body": "x", "key": f"new{k}", "deliver_after": "5h"}]
            + [{"topic": "share", "body": "x", "key": f"s{k}", "deliver_after": "10s"}]
        )

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(again, range(8)))
    for k, (fresh, named) in enumerate(answers):
        assert (named.id, named.deliver_at) == (firsts[k].id, firsts[k].deliver_at)
        assert fresh.id not in {f.id for f in firsts} and c.status(fresh.id).deliver_at == fresh.deliver_at


def test_async_client(cluster):
    async def run():
        async with AsyncClient([cluster.url(i) for i in cluster.indexes], CLIENT) as c:
            s = await c.produce("a", b"\x00\x01binary", tags=["t"])
            msgs = await c.pull("a", "g", tags="t", wait_ms=3_000)
            await c.ack("a", "g", [m.receipt for m in msgs])
            return s, msgs, await c.status(s.id)

    s, msgs, st = asyncio.run(run())
    assert [m.body for m in msgs] == [b"\x00\x01binary"] and st.state == "delivered" and msgs[0].id == s.id


def test_cli_produce_consume_cancel(cluster):
    import json

    from click.testing import CliRunner

    from horologe.cli import main

    env = {"HOROLOGE_CLIENT_TOKEN": CLIENT, "HOROLOGE_URL": ",".join(cluster.url(i) for i in cluster.indexes)}
    run = CliRunner(env=env).invoke
    r = run(main, ["produce", "--topic", "cli", "--body", "hello", "--tag", "x"])
    assert r.exit_code == 0, r.output
    later = run(main, ["produce", "--topic", "cli", "--body", "later", "--after", "1h", "--key", "k1"])
    assert run(main, ["cancel", "--topic", "cli", "--key", "k1"]).output.strip() == "cancelled"
    r = run(main, ["consume", "--topic", "cli", "--group", "g", "--count", "1"])
    assert r.exit_code == 0, r.output
    (line,) = r.output.strip().splitlines()
    assert json.loads(line)["body"] == "hello" and json.loads(line)["tags"] == ["x"]
    r = run(main, ["status", json.loads(later.output)["id"]])
    assert json.loads(r.output)["state"] == "cancelled"
    r = run(main, ["cancel", json.loads(later.output)["id"], "--topic", "cli", "--key", "k1"])
    assert r.exit_code == 2  # id or topic+key, not both
    for token, said in (("", "missing Authorization"), ("wrong", "wrong token for this API")):
        r = CliRunner(env={**env, "HOROLOGE_CLIENT_TOKEN": token}).invoke(
            main, ["status", json.loads(later.output)["id"]]
        )
        assert r.exit_code == 1 and said in r.output, r.output
        assert (
            "(the client token: --token or HOROLOGE_CLIENT_TOKEN; the admin API's: --admin-token" in r.output
        )


def test_cli_consume_takes_no_more_than_its_count_and_prints_any_body_whole(cluster):
    """``consume --count 2`` pulled a batch of up to --max and acked it all, printing more
    than asked; a script reading two lines lost the rest. A body not UTF-8 came out with
    replacement characters."""
    import base64
    import json

    from click.testing import CliRunner

    from horologe.cli import main

    c = client(cluster)
    c.produce("cli-count", b"\x89PNG\r\n", deliver_after=0)
    for k in range(4):
        c.produce("cli-count", f"m{k}", deliver_after=0)
    env = {"HOROLOGE_CLIENT_TOKEN": CLIENT, "HOROLOGE_URL": ",".join(cluster.url(i) for i in cluster.indexes)}
    wait_delivered(cluster)
    r = CliRunner(env=env).invoke(main, ["consume", "--topic", "cli-count", "--group", "g", "--count", "2"])
    assert r.exit_code == 0, r.output
    printed = [json.loads(line) for line in r.output.splitlines()]
    assert len(printed) == 2
    assert (
        printed[0].get("body_b64") == base64.b64encode(b"\x89PNG\r\n").decode() and "body" not in printed[0]
    )
    rest = drain(c, "cli-count", "g", idle_s=0.5)
    assert sorted(m.body for m in rest) == sorted(
        f"m{k}".encode() for k in range(4) if f"m{k}" != printed[1]["body"]
    )


def test_cli_produces_a_body_from_a_file_or_standard_input_bytes_and_all(cluster, tmp_path):
    """A body could only be --body text: none binary, and none over what an argument
    list takes (about 128 KiB), though a message may be 256 KiB."""
    import base64
    import json

    from click.testing import CliRunner

    from horologe.cli import main

    env = {"HOROLOGE_CLIENT_TOKEN": CLIENT, "HOROLOGE_URL": ",".join(cluster.url(i) for i in cluster.indexes)}
    run = CliRunner(env=env).invoke
    big = bytes(range(256)) * 800  # 200 KiB, not UTF-8
    (tmp_path / "body").write_bytes(big)
    assert run(main, ["produce", "--topic", "cli-file", "--body-file", str(tmp_path / "body")]).exit_code == 0
    r = run(main, ["produce", "--topic", "cli-file", "--body-file", "-"], input=b"from stdin")
    assert r.exit_code == 0, r.output
    r = run(main, ["produce", "--topic", "cli-file", "--body", "x", "--body-file", "-"], input=b"")
    assert r.exit_code == 2 and "give exactly one of --body and --body-file" in r.output
    r = run(main, ["consume", "--topic", "cli-file", "--group", "g", "--count", "2"])
    assert r.exit_code == 0, r.output
    got = [json.loads(line) for line in r.output.splitlines()]
    bodies = {base64.b64decode(m["body_b64"]) if "body_b64" in m else m["body"].encode() for m in got}
    assert bodies == {big, b"from stdin"}


def test_produce_retried_across_failover_is_stored_once(cluster):
    """A producer that never heard back retries with the same key on the new master."""
    c = client(cluster)
    first = c.produce("pay", "charge #77", key="charge-77", deliver_after="300ms")
    master = cluster.wait_leader()
    cluster.signal(master, signal.SIGKILL)
    cluster.wait_leader([i for i in cluster.indexes if i != master], exclude=master)
    again = c.produce("pay", "charge #77", key="charge-77", deliver_after="300ms")
    assert again.id == first.id
    got = drain(c, "pay", "g", idle_s=2.0)
    assert [m.id for m in got] == [first.id]


def _due(cluster, topic: str, n: int) -> list[str]:
    """Produce ``n`` messages already due; their bodies."""
    now = int(time.time() * 1000)
    cluster.produce(0, [{"topic": topic, "body": f"m{k}", "deliver_at": now - 1} for k in range(n)])
    return [f"m{k}" for k in range(n)]


def _nothing_left(cluster, topic: str) -> bool:
    time.sleep(1.5)  # on purpose: past every lease, an unacked message would be handed out again
    return cluster.client(0).pull(topic, "g", max=200, wait_ms=0) == []


def test_every_answer_layout_of_a_pull_hands_out_the_same_messages(cluster):
    """The SDK asks for msgpack by columns; an SDK from before them asks for msgpack by
    messages, and anything else gets JSON: each group sees the same messages."""
    _due(cluster, "wire", 20)
    c = cluster.client(0)
    got = {}
    for group, accept in (("cols", calls.PULL_COLUMNS), ("msgs", calls.MSGPACK), ("json", None)):
        reply = c.request(*core.pull_call("wire", group, None, 100, 3_000, 30_000, 0), accept=accept)
        body = reply.result()
        assert ("records" in body) == (group == "cols") and ("messages" in body) == (group != "cols")
        batch, _stray = core.to_pulled(core.pull_answer(reply.content, reply.content_type), None)
        got[group] = sorted((m.id, m.body, m.topic, m.tags, m.deliver_at, m.delivered_at) for m in batch)
        c.ack("wire", group, batch.receipts())
    assert len(got["cols"]) == 20 and got["cols"] == got["msgs"] == got["json"]


def test_consume_iterator_receives_and_acks_everything(cluster):
    bodies = _due(cluster, "it", 120)
    c = cluster.client(0)
    seen = []
    with c.consume("it", "g", batch=50, wait_ms=500, visibility_ms=1_000) as messages:
        for m in messages:
            seen.append(m.text)
            if len(seen) == 120:
                break
    assert sorted(seen) == sorted(bodies)
    assert _nothing_left(cluster, "it")


def test_poll_hands_over_batches_and_acks_them_on_the_next_call(cluster):
    bodies = _due(cluster, "pl", 120)
    c = cluster.client(0)
    seen = []
    with c.consume("pl", "g", batch=50, wait_ms=500, visibility_ms=1_000) as sub:
        while len(seen) < 120:
            batch = sub.poll(5.0)
            assert batch, "a pulled batch was due within the timeout"
            assert len(batch) <= 50
            seen.extend(m.text for m in batch)
        assert sub.poll(0.3) == []  # nothing more: the timeout, not a hang
    assert sorted(seen) == sorted(bodies)
    assert _nothing_left(cluster, "pl")


def test_async_poll_hands_over_batches_and_acks_them(cluster):
    bodies = _due(cluster, "apl", 60)

    async def run() -> list[str]:
        seen = []
        async with AsyncClient([cluster.url(i) for i in cluster.indexes], CLIENT) as c:
            async with c.consume("apl", "g", batch=25, wait_ms=500, visibility_ms=1_000) as sub:
                while len(seen) < 60:
                    batch = await sub.poll(5.0)
                    assert batch
                    seen.extend(m.text for m in batch)
                assert await sub.poll(0.3) == []
        return seen

    assert sorted(asyncio.run(run())) == sorted(bodies)
    assert _nothing_left(cluster, "apl")


def test_closing_a_consumer_gives_back_more_than_one_call_takes(cluster):
    """Left over at close: the rest of a batch of 1,000 and one pulled ahead, 1,999
    receipts in one release, which the node refuses past 1,000: nothing was given back,
    and those messages waited out their leases."""
    now = int(time.time() * 1000)
    for start in range(0, 2500, 1000):
        cluster.produce(
            0,
            [{"topic": "gb", "body": f"m{k}", "deliver_at": now - 1} for k in range(start, start + 1000)][
                : 2500 - start
            ],
        )
    c = cluster.client(0)
    with c.consume("gb", "g", batch=1000, prefetch=1, pulls=1, visibility_ms=600_000) as sub:
        next(sub)
        time.sleep(1.0)  # the next batch pulled ahead
    got = 0
    for _ in range(5):
        got += len(c.pull("gb", "g", max=1000, wait_ms=0))
    assert got == 2499


def test_messages_that_wait_pulled_ahead_longer_than_their_lease_are_handled_once(cluster):
    """A consumer pulls ahead of what it hands over (``prefetch`` batches ready, ``pulls``
    more on their way), and a lease runs from the pull: with a handler of 20 ms and 150
    messages pulled ahead, the last waited 3 s in the consumer behind a lease of 1 s.
    Their leases ended while they waited, its own next pull took them again, and the
    handler ran them again (400 repeats in a run). What waits is renewed now."""
    bodies = _due(cluster, "ahead", 300)
    c = cluster.client(0)
    seen = []
    with c.consume("ahead", "g", batch=50, wait_ms=500, visibility_ms=1_000, prefetch=2, pulls=1) as messages:
        for m in messages:
            seen.append(m.text)
            time.sleep(0.02)
            if len(set(seen)) == 300:
                break
    assert sorted(seen) == sorted(bodies), f"{len(seen) - len(set(seen))} handled twice"
    assert _nothing_left(cluster, "ahead")


def test_an_async_consumer_renews_what_it_pulled_ahead_as_well(cluster):
    """As above, through the asyncio client."""
    bodies = _due(cluster, "aahead", 300)

    async def run() -> list[str]:
        seen = []
        async with AsyncClient([cluster.url(i) for i in cluster.indexes], CLIENT) as c:
            sub = c.consume("aahead", "g", batch=50, wait_ms=500, visibility_ms=1_000, prefetch=2, pulls=1)
            async with sub as messages:
                async for m in messages:
                    seen.append(m.text)
                    await asyncio.sleep(0.02)
                    if len(set(seen)) == 300:
                        break
        return seen

    seen = asyncio.run(run())
    assert sorted(seen) == sorted(bodies), f"{len(seen) - len(set(seen))} handled twice"
    assert _nothing_left(cluster, "aahead")
