"""Reschedule on a real 3-node cluster: by id, by key and in batches; the id stays, the
message fires once at its new time and never at its old one, across a master SIGKILL."""

from __future__ import annotations

import datetime
import json
import signal
import time

import pytest
from click.testing import CliRunner

from horologe.cli import main
from horologe.client import AlreadyDeliveredError, InvalidRequestError, MessageCancelledError, NotFoundError
from horologe.storage import check_store
from testkit.process_cluster import CLIENT
from testkit.waiting import wait_until


def _receive_all(client, topic: str, want: int, timeout_s: float) -> dict[str, list[tuple[int, int]]]:
    """Every message a group receives within the time: id -> [(deliver_at, received at ms)]."""
    got: dict[str, list[tuple[int, int]]] = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and sum(map(len, got.values())) < want:
        batch = client.pull(topic, "g", max=100, wait_ms=500)
        now = int(time.time() * 1000)
        for m in batch:
            got.setdefault(m.id, []).append((m.deliver_at, now))
        if batch:
            client.ack(topic, "g", batch.receipts())
    time.sleep(1.0)  # anything past the last one would be a second copy
    for m in client.pull(topic, "g", max=100, wait_ms=200):
        got.setdefault(m.id, []).append((m.deliver_at, -1))
    return got


def test_reschedule_by_id_key_and_batch_across_a_master_kill(cluster):
    c = cluster.client(1)
    now = int(time.time() * 1000)
    early = [c.produce("r", f"early-{k}", deliver_at=now + 5_000) for k in range(3)]
    late = c.produce("r", "late", deliver_at=now + 600_000, key="order-9")
    batch = [c.produce("r", f"b-{k}", deliver_at=now + 3_000 + k) for k in range(20)]
    # later, sooner, by key, and a batch that mixes all three with a miss
    moved = c.reschedule(early[0].id, deliver_after="9s")
    assert (moved.id, moved.topic) == (early[0].id, "r") and moved.deliver_at >= now + 9_000
    assert c.reschedule(early[1].id, deliver_at=now + 8_000).deliver_at == now + 8_000
    assert c.reschedule_key("r", "order-9", deliver_at=now + 7_000).id == late.id
    items = [{"id": b.id, "deliver_at": now + 10_000 + k} for k, b in enumerate(batch)]
    items.append({"id": "0" * 16, "deliver_at": now})
    items.append({"topic": "r", "key": "no-such-key", "deliver_after": 1000})
    results = c.reschedule_batch(items)
    assert [r.id for r in results[:20]] == [b.id for b in batch]
    assert isinstance(results[20], NotFoundError) and isinstance(results[21], NotFoundError)
    assert c.status(early[0].id).deliver_at == moved.deliver_at
    listed = [(m.id, m.deliver_at) for m in c.pending("r", limit=1000).messages]
    assert (early[0].id, moved.deliver_at) in listed and len({i for i, _ in listed}) == len(listed)
    # a master SIGKILL before any new time comes
    old = cluster.wait_leader()
    cluster.signal(old, signal.SIGKILL)
    cluster.wait_leader([i for i in cluster.indexes if i != old], exclude=old)
    reader = cluster.client([i for i in cluster.indexes if i != old][0], retry_s=20)
    got = _receive_all(reader, "r", 24, 40)
    want = {
        early[0].id: moved.deliver_at,
        early[1].id: now + 8_000,
        early[2].id: now + 5_000,
        late.id: now + 7_000,
        **{b.id: now + 10_000 + k for k, b in enumerate(batch)},
    }
    assert sorted(got) == sorted(want)  # under the ids they were given
    for mid, copies in got.items():
        assert len(copies) == 1, (mid, copies)  # once: never at the old time too
        deliver_at, received = copies[0]
        assert deliver_at == want[mid] and received >= want[mid], (mid, copies)
    st = reader.status(late.id)
    assert (st.state, st.deliver_at) == ("delivered", now + 7_000) and st.delivered_at >= now + 7_000
    with pytest.raises(AlreadyDeliveredError):
        reader.reschedule(late.id, deliver_after="1h")
    cluster.start(old)
    cluster.catch_up(old)
    for i in cluster.indexes:
        cluster.status(i)  # every node answers
    cluster.stop_all()
    for i in cluster.indexes:
        check_store(cluster.store(i))


def test_reschedule_refusals(cluster):
    c = cluster.client(0)
    m = c.produce("r", "x", deliver_after="1h")
    bad = ({}, {"deliver_at": 1, "deliver_after": "1s"}, {"deliver_in": "1s"}, {"deliver_after": "soon"})
    for body in bad:
        with pytest.raises(InvalidRequestError) as e:
            c.request("PATCH", f"/v1/messages/{m.id}", body)
        assert e.value.status == 400, body
    with pytest.raises(InvalidRequestError) as e:
        c.request("PATCH", f"/v1/messages/{m.id}", {"deliver_after": "500d"})
    assert e.value.status == 422 and e.value.code == "out_of_range"
    with pytest.raises(NotFoundError):
        c.reschedule("00000000ffffffff", deliver_after="1s")
    with pytest.raises(InvalidRequestError) as e:
        c.request("PATCH", "/v1/messages?topic=r", {"deliver_after": "1s"})
    assert e.value.field == "key"
    with pytest.raises(InvalidRequestError) as e:
        c.produce("r", "x", headers={"X-Horologe-Id": m.id})
    assert e.value.field == "headers"  # the node's own headers cannot be forged
    assert c.status(m.id).state == "scheduled"
    args = ["reschedule", "--url", cluster.url(0), "--token", CLIENT, m.id]
    day = (int(time.time()) // 86_400 + 200) * 86_400  # a midnight 200 days ahead
    iso = datetime.datetime.fromtimestamp(day, datetime.UTC).isoformat()
    shown = CliRunner().invoke(main, [*args, "--at", iso])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output) == {"id": m.id, "topic": "r", "deliver_at": day * 1000}
    assert c.status(m.id).deliver_at == day * 1000
    assert CliRunner().invoke(main, [*args, "--at", "1", "--after", "1s"]).exit_code == 2  # usage
    c.cancel(m.id)
    with pytest.raises(MessageCancelledError):
        c.reschedule(m.id, deliver_after="1s")
    wait_until(lambda: c.status(m.id).state == "cancelled", 5)


def test_a_message_named_twice_in_a_batch_moves_to_the_last_time_given(make_cluster):
    """Whether named by id or by key, in any order: the entry took every id before every
    key, so a key given before the id moved the message to the key's time; and each item
    answered its own time, though the message moved once."""
    c = make_cluster(nodes=1).client(0)
    now = int(time.time() * 1000)
    m = c.produce("r", "x", deliver_at=now + 3_600_000, key="k")
    first, last = now + 7_200_000, now + 10_800_000
    results = c.reschedule_batch(
        [{"topic": "r", "key": "k", "deliver_at": first}, {"id": m.id, "deliver_at": last}]
    )
    assert [(r.id, r.deliver_at) for r in results] == [(m.id, last), (m.id, last)]
    assert c.status(m.id).deliver_at == last
    results = c.reschedule_batch([{"id": m.id, "deliver_at": last + 1}, {"id": m.id, "deliver_at": first}])
    assert [(r.id, r.deliver_at) for r in results] == [(m.id, first), (m.id, first)]
    assert c.status(m.id).deliver_at == first
