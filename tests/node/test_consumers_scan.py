"""Consumers built without a node: a committed view and a proposal function are all they need."""

from __future__ import annotations

import asyncio

import pytest

from horologe.client import pull_columns
from horologe.cluster import ACK, PRODUCE, RETRY, SYNC, NotMasterError
from horologe.cluster.consumer_groups import retry_topic
from horologe.node.consumers import service
from horologe.node.consumers.receipts import Receipts
from horologe.node.consumers.service import SCAN_LIMIT, Consumers, TagFilter, Taken
from horologe.node.consumers.wire import as_columns, as_json
from horologe.node.errors import CallerGone
from horologe.storage import Message, ReadyEntry
from horologe.wheel import ALL, Watermark

from .local_log import LocalLog

T = 1_767_225_600_000


@pytest.fixture
def log(tmp_path):
    now = [T]
    log = LocalLog(str(tmp_path / "s"), lambda: now[0])
    log.now = now
    yield log
    log.close()


def consumers_over(log: LocalLog) -> Consumers:
    """Consumers over ``log``; inside a running loop, with their committer running (a pull
    answers once its leases are committed)."""
    consumers = Consumers(log.view, log.propose, log.clock, (1000,), 50, Receipts("secret"))
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return consumers  # scans only
    committer = loop.create_task(consumers.run())
    consumers.committer = committer  # referenced while the test runs
    return consumers


def test_a_filter_that_matches_nothing_reads_at_most_scan_limit_entries(log):
    n = SCAN_LIMIT + 100_000
    log.machine.store.apply(1, lambda tx: tx.append_ready("t", [ReadyEntry(5, k, 0, T, T) for k in range(n)]))
    log.index = 1
    consumers = consumers_over(log)
    out, skipped = Taken(), []
    consumers._scan("g", "t", TagFilter.parse("red"), 32, T, out, skipped, 30_000)
    assert len(out) == 0 and skipped == []  # the view has not followed the write yet: nothing to read
    log.publish()
    consumers._scan("g", "t", TagFilter.parse("red"), 32, T, out, skipped, 30_000)
    assert len(out) == 0 and skipped == [("g", "t", 0, SCAN_LIMIT)]  # skip-acks for what it read, no more


async def _deliver(log: LocalLog, n: int) -> None:
    """Store ``n`` messages due at T and let the watermark pass them."""
    await log.propose(PRODUCE, messages=[Message("t", b"m%d" % i, T, T) for i in range(n)])
    log.now[0] = T + 1
    log.ws = lambda: Watermark(T, ALL)
    await log.propose(SYNC)


def test_pull_ack_and_nack_over_the_view(log):
    async def run() -> None:
        await _deliver(log, 3)
        consumers = consumers_over(log)
        got = as_json(await consumers.pull("g", "t", None, 10, 0, 30_000), T)["messages"]
        assert [m["body"] for m in got] == ["m0", "m1", "m2"]
        assert as_json(await consumers.pull("g", "t", None, 10, 0, 30_000), T)["messages"] == []  # leased
        assert await consumers.ack("g", "t", [got[0]["receipt"], got[0]["receipt"]]) == 1
        assert log.view.group_progress("g", "t").is_acked(0)
        assert await consumers.nack("g", "t", [got[1]["receipt"]]) == {"retried": 1, "dead_lettered": 0}
        assert [r.kind for r in log.applied][-2:] == [ACK, "R"]

    asyncio.run(run())


def test_an_extend_by_a_clock_that_fell_back_never_shortens_a_lease(log):
    """Quorum time falls back when a new majority's clocks lag: an extend asked then keeps
    at least the end its pull handed out, and the message stays leased until then."""

    async def run() -> None:
        await _deliver(log, 1)
        consumers = consumers_over(log)
        (got,) = as_json(await consumers.pull("g", "t", None, 1, 0, 30_000), T)["messages"]
        log.now[0] = T - 20_000  # the clock fell back 20 s
        extended, until = await consumers.extend("g", "t", [got["receipt"]], 1_000)
        assert (extended, until) == (1, T + 1 + 30_000)
        log.now[0] = T + 10_000  # past what the extend asked, inside the pull's lease
        assert as_json(await consumers.pull("g", "t", None, 1, 0, 30_000), T)["messages"] == []

    asyncio.run(run())


def test_a_waiting_pull_wakes_on_notify(log):
    async def run() -> None:
        consumers = consumers_over(log)
        pull = asyncio.create_task(consumers.pull("g", "t", None, 10, 5_000, 30_000))
        await asyncio.sleep(0.05)  # time passing is the point: with nothing delivered, it keeps waiting
        assert not pull.done()
        await _deliver(log, 1)
        consumers.notify()
        # Well before its wait's own timer (1 s): the notify wakes it (then it commits its lease).
        await asyncio.wait_for(asyncio.shield(pull), 0.5)
        assert [m["body"] for m in as_json(pull.result(), T)["messages"]] == ["m0"]

    asyncio.run(run())


def test_pulls_of_a_hot_second_start_where_the_last_one_stopped(log):
    """Pulling n messages ``want`` at a time, none acked yet, reads O(n) ready entries in
    all: each pull starts at the last one's stopping point, not at the committed offset
    (from there, pull j re-read the j·want entries leased before it: O(n²/want))."""

    async def run() -> None:
        n, want = 10_000, 250
        await _deliver(log, n)
        consumers = consumers_over(log)
        reads = log.view.reads
        read = reads.read_ready
        rows_read = []

        def counting(topic, start=None, stop=None):
            rows = read(topic, start, stop)
            rows_read.append(len(rows))
            return rows

        reads.read_ready = counting
        got = []
        for _ in range(n // want):
            got += as_json(await consumers.pull("g", "t", None, want, 0, 30_000), T)["messages"]
        assert len({m["id"] for m in got}) == n  # every message, once
        assert sum(rows_read) <= 5 * n  # from the committed offset each time: 20 n here
        log.now[0] += 30_001  # every lease expired: the scan starts over from the committed offset
        again = as_json(await consumers.pull("g", "t", None, want, 0, 30_000), T)["messages"]
        assert [m["id"] for m in again] == [m["id"] for m in got[:want]]

    asyncio.run(run())


def test_one_batch_receipt_acks_what_its_pull_leased_and_nothing_else(log):
    async def run() -> None:
        await _deliver(log, 10)
        consumers = consumers_over(log)
        first = as_json(await consumers.pull("g", "t", None, 4, 0, 30_000), T)
        second = as_json(await consumers.pull("g", "t", None, 4, 0, 30_000), T)
        assert len(first["batch_receipts"]) == 1
        # The batch receipt with a message's own receipt from it: each message counts once.
        assert await consumers.ack("g", "t", [*first["batch_receipts"], first["messages"][1]["receipt"]]) == 4
        progress = log.view.group_progress("g", "t")
        assert [o for o in range(10) if progress.is_acked(o)] == [0, 1, 2, 3]
        assert log.proposed[-1].acks == [("g", "t", 0, 4)]  # one range
        assert await consumers.ack("g", "t", second["batch_receipts"]) == 4
        assert log.view.group_progress("g", "t").committed == 8
        rest = as_json(await consumers.pull("g", "t", None, 10, 0, 30_000), T)
        assert [m["body"] for m in rest["messages"]] == ["m8", "m9"]

    asyncio.run(run())


def test_acks_and_a_pulls_leases_that_meet_share_one_entry(log):
    """While one A entry is in flight, an ack and a pull's leases that arrive go in the next
    one together: under load a consumer's acks ride with its next pull's leases."""

    async def run() -> None:
        await _deliver(log, 6)
        gate, propose = asyncio.Event(), log.propose
        gate.set()

        async def gated(kind, **fields):
            await gate.wait()
            return await propose(kind, **fields)

        log.propose = gated
        consumers = consumers_over(log)
        first = as_json(await consumers.pull("g", "t", None, 2, 0, 30_000), T)["messages"]
        gate.clear()
        in_flight = asyncio.ensure_future(consumers.ack("g", "t", [first[0]["receipt"]]))
        await asyncio.sleep(0.08)  # past the 50 ms linger: proposed, waits at the gate
        meeting = asyncio.ensure_future(consumers.ack("g", "t", [first[1]["receipt"]]))
        pull = asyncio.ensure_future(consumers.pull("g", "t", None, 2, 0, 30_000))
        await asyncio.sleep(0.01)
        gate.set()
        assert await in_flight == 1 and await meeting == 1
        assert [m["body"] for m in as_json(await pull, T)["messages"]] == ["m2", "m3"]
        last = log.proposed[-1]
        assert last.kind == ACK and last.acks == [("g", "t", 1, 2)]
        assert [lease[2:4] for lease in last.leases] == [(2, 4)]

    asyncio.run(run())


def test_a_message_fired_ahead_of_its_time_is_handed_out_once_due(log):
    """The wheel fires ahead by its lead (node/wheel_driver.py): an S stamped at T delivers
    messages due at T+50 and T+60 into the ready log. Each is recorded as delivered at its
    own time, and no pull hands it out before then, nor holds up a due one behind it; a
    pull that waits wakes at that time, with no notify."""

    async def run() -> None:
        due = [T, T + 50, T + 60]
        await log.propose(PRODUCE, messages=[Message("t", b"m%d" % i, at, T) for i, at in enumerate(due)])
        log.ws = lambda: Watermark(T + 60, ALL)
        await log.propose(SYNC)  # stamped at T: the lead is 60 ms
        rows = log.view.reads.read_ready("t")
        assert rows["delivered_at_ms"].tolist() == due
        consumers = consumers_over(log)
        got = as_json(await consumers.pull("g", "t", None, 10, 0, 30_000), T)["messages"]
        assert [m["body"] for m in got] == ["m0"]
        log.now[0] = T + 59
        # Due already when produced: ready behind m2, and not held up by it.
        await log.propose(PRODUCE, messages=[Message("t", b"m3", T - 5, T + 59)])
        got = as_json(await consumers.pull("g", "t", None, 10, 0, 30_000), T)["messages"]
        assert [m["body"] for m in got] == ["m1", "m3"]
        pull = asyncio.create_task(consumers.pull("g", "t", None, 10, 5_000, 30_000))
        await asyncio.sleep(0.02)
        assert not pull.done()  # m2 is not due by the clock yet
        log.now[0] = T + 60
        # It wakes by its own timer, set for m2's time (10 ms away when it went to sleep);
        # without one it would sleep out its 1 s lease check.
        got = as_json(await asyncio.wait_for(pull, 0.9), T)["messages"]
        assert [(m["body"], m["deliver_at"], m["delivered_at"]) for m in got] == [("m2", T + 60, T + 60)]

    asyncio.run(run())


def test_a_pull_ahead_takes_what_the_wheel_fired_up_to_ahead_ms_before_its_time(log):
    """With ``ahead_ms`` a pull hands out a message already in the ready log that long
    before its time (the SDK holds it until then: horologe/client/holding.py); a waiting
    one wakes by its timer at that earlier time. What the wheel has not fired is not
    handed out however far ahead the pull asks."""

    async def run() -> None:
        due = [T + 30, T + 50, T + 60, T + 500]
        await log.propose(PRODUCE, messages=[Message("t", b"m%d" % i, at, T) for i, at in enumerate(due)])
        log.ws = lambda: Watermark(T + 60, ALL)
        await log.propose(SYNC)  # stamped at T: fires the first three, not m3
        consumers = consumers_over(log)
        got = as_json(await consumers.pull("g", "t", None, 10, 0, 30_000, ahead_ms=40), T)["messages"]
        assert [(m["body"], m["deliver_at"]) for m in got] == [("m0", T + 30)]  # 30 ms ahead
        pull = asyncio.create_task(consumers.pull("g", "t", None, 10, 5_000, 30_000, ahead_ms=40))
        await asyncio.sleep(0.02)
        assert not pull.done()  # m1 is 50 ms away: 10 ms more than the pull takes
        log.now[0] = T + 10
        got = as_json(await asyncio.wait_for(pull, 0.9), T)["messages"]  # its timer, no notify
        assert [m["body"] for m in got] == ["m1"]
        got = as_json(await consumers.pull("g", "t", None, 10, 0, 30_000, ahead_ms=1000), T)["messages"]
        assert [m["body"] for m in got] == ["m2"]  # m3 is not fired: not in the ready log
        # Held by the consumer until T+60, m2 is leased from then, not from T+10.
        assert consumers.leases[("g", "t")][2] == T + 60 + 30_000

    asyncio.run(run())


def test_a_pull_passes_over_messages_still_leased_among_expired_ones(log):
    """Leases are looked up for the rows a pull is about to take: held ones among them
    are passed over, not handed out twice, and come back when their own lease ends."""

    async def run() -> None:
        await _deliver(log, 10)
        consumers = consumers_over(log)

        async def bodies(want: int, visibility_ms: int) -> list[str]:
            got = as_json(await consumers.pull("g", "t", None, want, 0, visibility_ms), log.now[0])
            return [m["body"] for m in got["messages"]]

        assert await bodies(2, 1_000) == ["m0", "m1"]
        assert await bodies(3, 60_000) == ["m2", "m3", "m4"]
        assert await bodies(2, 1_000) == ["m5", "m6"]
        log.now[0] += 1_001  # m0, m1, m5 and m6 are free again; m2-m4 are held
        assert await bodies(10, 60_000) == ["m0", "m1", "m5", "m6", "m7", "m8", "m9"]
        assert await bodies(10, 60_000) == []
        log.now[0] += 59_500  # m2-m4's leases end (taken 1 s earlier); the others' do not yet
        assert await bodies(3, 60_000) == ["m2", "m3", "m4"]

    asyncio.run(run())


def test_leases_given_back_are_handed_out_again_at_once_with_no_attempt_counted(log):
    async def run() -> None:
        await _deliver(log, 3)
        consumers = consumers_over(log)
        first = await consumers.pull("g", "t", None, 10, 0, 30_000)
        assert len(first.taken) == 3
        assert len((await consumers.pull("g", "t", None, 10, 0, 30_000)).taken) == 0  # leased, held
        assert consumers.give_back("g", "t", first.receipts[1:]) == 2
        again = as_json(await consumers.pull("g", "t", None, 10, 0, 30_000), T)["messages"]
        assert [(m["body"], m["attempt"]) for m in again] == [("m1", 0), ("m2", 0)]
        assert len((await consumers.pull("g", "t", None, 10, 0, 30_000)).taken) == 0  # m0 still leased
        assert [r.kind for r in log.applied].count("R") == 0  # nothing retried, nothing proposed

    asyncio.run(run())


def test_each_message_says_how_often_it_was_handed_out_on_any_master(log):
    """A message whose lease ended, or was given back or released, is handed out again
    counted; the count is the committed leases', so a new master and a named pull sent
    again give the same; an ack ends it, a nack's retry starts its own."""

    async def run() -> None:
        await _deliver(log, 4)
        consumers = consumers_over(log)

        async def counts(c: Consumers, want: int, visibility_ms: int = 1_000, **kw) -> list[tuple]:
            got = as_json(await c.pull("g", "t", None, want, 0, visibility_ms, **kw), log.now[0])
            return [(m["body"], m["deliveries"]) for m in got["messages"]]

        first = await consumers.pull("g", "t", None, 4, 0, 1_000)
        assert first.deliveries == [1, 1, 1, 1]
        assert consumers.give_back("g", "t", first.receipts[:1]) == 1
        assert await consumers.release("g", "t", first.receipts[1:2]) == 1
        assert await counts(consumers, 2) == [("m0", 2), ("m1", 2)]
        log.now[0] += 1_001  # every lease ended: m2 and m3 for the first time
        successor = consumers_over(log)  # another master over the same committed state
        got = await counts(successor, 4, 30_000, pull_id="p1")
        assert got == [("m0", 3), ("m1", 3), ("m2", 2), ("m3", 2)]
        again = await consumers_over(log).pull("g", "t", None, 4, 0, 30_000, pull_id="p1")
        assert again.deliveries == [3, 3, 2, 2]  # the lost answer's, not counted twice
        raw = as_columns(again, log.now[0])
        assert [m.deliveries for m in pull_columns.decode(raw).messages] == [3, 3, 2, 2]
        assert b"deliveries" not in as_columns(first, log.now[0])  # all first hand-outs: left off
        assert await successor.ack("g", "t", again.receipts[:1]) == 1
        assert await successor.nack("g", "t", again.receipts[1:2]) == {"retried": 1, "dead_lettered": 0}
        log.now[0] += 31_000  # the leases ended again (m1 went to its retry topic: acked here)
        assert await counts(successor, 4) == [("m2", 3), ("m3", 3)]
        assert len((await successor.pull("g", "t", None, 4, 0, 1_000)).taken) == 0

    asyncio.run(run())


def test_a_waiting_pull_ends_when_its_node_stops_leading(log):
    """A long poll must not outlive its master: the leases it would take were forgotten
    with the role, and the new master hands the same messages out (raft-safety finding 2)."""
    leading = [True]

    def require_master() -> None:
        if not leading[0]:
            raise NotMasterError("http://127.0.0.1:1")

    async def run() -> None:
        consumers = Consumers(
            log.view, log.propose, log.clock, (1000,), 50, Receipts("secret"), require_master=require_master
        )
        pull = asyncio.create_task(consumers.pull("g", "t", None, 10, 5_000, 30_000))
        await asyncio.sleep(0.05)  # waiting: nothing is due yet
        leading[0] = False
        consumers.forget_leases()  # the role went (NodeService._on_role)
        await _deliver(log, 1)  # and a message fell due, which the new master hands out
        consumers.notify()
        with pytest.raises(NotMasterError):
            await asyncio.wait_for(pull, 2)

    asyncio.run(run())


def test_the_leases_a_pull_queued_are_never_proposed_once_its_node_stops_leading(log):
    """A pull's leases wait in the group commit behind the entry in flight when the role
    goes: they are failed (the pull answers 503), not proposed once the node leads again,
    when its new scans, which no longer know them, hand the same messages to another pull
    (the simulator's canary no-lease-fail)."""
    gate = asyncio.Event()

    async def slow_propose(kind, **fields):
        await gate.wait()  # the entry in flight: its commit takes a while
        return await log.propose(kind, **fields)

    async def run() -> None:
        await _deliver(log, 2)
        consumers = Consumers(log.view, slow_propose, log.clock, (1000,), 0, Receipts("secret"))
        committer = asyncio.create_task(consumers.run())
        first = asyncio.create_task(consumers.pull("g", "t", None, 1, 0, 30_000))
        await asyncio.sleep(0.02)  # its leases in flight
        queued = asyncio.create_task(consumers.pull("g", "t", None, 1, 0, 30_000))
        await asyncio.sleep(0.02)  # its leases queued behind
        consumers.forget_leases()  # the role went (NodeService._on_role)
        gate.set()
        assert len((await first).taken) == 1
        with pytest.raises(NotMasterError):
            await queued
        await asyncio.sleep(0.05)
        leased = [item[2] for entry in log.proposed if entry.kind == ACK for item in entry.leases]
        assert leased == [0]
        committer.cancel()

    asyncio.run(run())


def test_a_pull_reads_at_most_scan_limit_entries_however_far_its_window_reaches(log, monkeypatch):
    """The window counts only entries not acked, so it may reach far past a message leased
    for long: a scan read every entry up to its end, acked or not (hours of a queue's
    traffic on the event loop). It reads at most SCAN_LIMIT, and the next goes on from
    where it stopped."""
    monkeypatch.setattr(service, "SCAN_LIMIT", 4)

    async def run() -> None:
        await _deliver(log, 20)
        consumers = consumers_over(log)
        await consumers.pull("g", "t", None, 1, 0, 3_600_000)  # m0, held for long
        for _ in range(5):  # m1..m15 acked, three at a time (m0 and three: the limit)
            done = await consumers.pull("g", "t", None, 3, 0, 30_000)
            assert await consumers.ack("g", "t", done.receipts) == 3
        read = []
        real = log.view.reads.read_ready

        def counted(topic, lo, hi):
            rows = real(topic, lo, hi)
            read.append(len(rows))
            return rows

        monkeypatch.setattr(log.view.reads, "read_ready", counted)
        consumers._cursors.clear()  # a scan from the committed offset (a cursor run out)
        first = as_json(await consumers.pull("g", "t", None, 10, 0, 30_000), T)["messages"]
        assert sum(read) <= 4
        second = as_json(await consumers.pull("g", "t", None, 10, 0, 30_000), T)["messages"]
        assert [m["body"] for m in first + second] == ["m16", "m17", "m18"]  # four not acked: the limit

    asyncio.run(run())


def test_the_leases_a_pull_gathered_in_the_ack_window_are_never_proposed_once_its_node_stops_leading(log):
    """With a linger (``ack_window_ms``), a pull's leases wait in the batch being gathered,
    out of the queue, when the role goes: the failing of what waits missed them, and they
    were proposed once the window closed, beside the leases a new lead's scans take."""

    async def run() -> None:
        await _deliver(log, 1)
        consumers = Consumers(log.view, log.propose, log.clock, (1000,), 200, Receipts("secret"))
        committer = asyncio.create_task(consumers.run())
        pull = asyncio.create_task(consumers.pull("g", "t", None, 1, 0, 30_000))
        await asyncio.sleep(0.05)  # its leases gathered, the window still open
        consumers.forget_leases()  # the role went (NodeService._on_role)
        with pytest.raises(NotMasterError):
            await pull
        await asyncio.sleep(0.3)  # past the window
        assert [entry for entry in log.proposed if entry.kind == ACK] == []
        committer.cancel()

    asyncio.run(run())


def test_a_pull_refused_once_its_leases_committed_gives_them_back_for_the_pull_made_again(log):
    """The master check after a pull's leases committed can fail for a moment (its read
    lease lapsed under fsync load): the held request made the pull again, which passed
    over what the first had leased, held for nobody until the lease ended (30 s here)."""
    from horologe.node.master_hold import MasterHold

    checks = [0]

    def require_master() -> None:
        checks[0] += 1
        if checks[0] == 2:  # the check after the first pull's leases committed
            raise NotMasterError(None)

    async def run() -> None:
        await _deliver(log, 2)
        consumers = Consumers(
            log.view, log.propose, log.clock, (1000,), 0, Receipts("secret"), require_master=require_master
        )
        committer = asyncio.create_task(consumers.run())
        hold = MasterHold(consumers._require_master, lambda: True, 1.0)
        got = await hold.through(lambda: consumers.pull("g", "t", None, 1, 0, 30_000))
        assert [m["body"] for m in as_json(got, T)["messages"]] == ["m0"]
        committer.cancel()

    asyncio.run(run())


def test_a_pull_whose_leases_committed_as_a_handover_began_answers_them(log):
    """A master hands its place over (a graceful stop) while a pull's leases commit: the pull
    answered 503 and gave them back, but a release cannot be proposed while handing over, so
    they stayed leased to nobody, and the pull made again at the next master (a raw HTTP
    pull, without a name) waited out their visibility (30 s here)."""
    releasing = [False]

    def require_leading() -> None:
        pass  # master, its lease held

    def require_master() -> None:
        if releasing[0]:
            raise NotMasterError(None)
        require_leading()

    async def run() -> None:
        await _deliver(log, 1)
        consumers = Consumers(
            log.view,
            log.propose,
            log.clock,
            (1000,),
            0,
            Receipts("secret"),
            require_master=require_master,
            require_leading=require_leading,
        )
        propose = consumers._propose

        async def handing_over_meanwhile(kind, **fields):
            done = await propose(kind, **fields)
            releasing[0] = bool(fields.get("leases"))
            return done

        consumers._propose = handing_over_meanwhile
        committer = asyncio.create_task(consumers.run())
        got = await consumers.pull("g", "t", None, 1, 0, 30_000)
        assert [m["body"] for m in as_json(got, T)["messages"]] == ["m0"]
        committer.cancel()

    asyncio.run(run())


def test_a_node_handing_over_is_no_master_but_still_leads(tmp_path, monkeypatch):
    """What ``Consumers`` is given to check before answering: the handover alone is no refusal."""
    from horologe.node.clock import system_clock
    from horologe.node.config import NodeConfig
    from horologe.node.service import NodeService

    config = NodeConfig(node_id="n1", data_dir=str(tmp_path), http="127.0.0.1:1", raft="127.0.0.1:2")
    svc = NodeService(config, system_clock(0))
    try:
        checks = {"is_master": True, "lease_held": True, "fresh": True, "_applied_own_term": True}
        monkeypatch.setattr(svc, "is_master", lambda: checks["is_master"])
        monkeypatch.setattr(svc, "leader_http", lambda: "http://127.0.0.1:3")
        monkeypatch.setattr(svc, "_applied_own_term", lambda: checks["_applied_own_term"])
        raft = type("Raft", (), {"lease_held": lambda self: checks["lease_held"]})
        monkeypatch.setattr(svc, "raft", raft())
        monkeypatch.setattr(svc.quorum_clock, "fresh", lambda: checks["fresh"])
        svc.handover.releasing = True
        with pytest.raises(NotMasterError):
            svc.require_master()
        svc.consumers._require_leading()  # leads: may answer
        for check in checks:
            checks[check] = False
            with pytest.raises(NotMasterError):
                svc.consumers._require_leading()
            checks[check] = True
    finally:
        svc.view.close()
        svc._writer.store.close()


def test_a_new_master_honours_the_committed_leases_and_a_failed_commit_leases_nothing(log):
    async def run() -> None:
        await _deliver(log, 3)
        first = await consumers_over(log).pull("g", "t", None, 2, 0, 30_000)
        successor = consumers_over(log)  # another master over the same committed state
        (left,) = as_json(await successor.pull("g", "t", None, 10, 0, 30_000), T)["messages"]
        assert left["body"] == "m2"
        assert await successor.release("g", "t", first.receipts[:1]) == 1  # good on the successor
        assert [
            m["body"] for m in as_json(await successor.pull("g", "t", None, 10, 0, 30_000), T)["messages"]
        ] == ["m0"]

        failing = consumers_over(log)
        propose = failing._propose

        async def refused(kind, **fields):
            if fields.get("leases"):
                raise NotMasterError(None)
            return await propose(kind, **fields)

        failing._propose = refused
        log.now[0] = T + 60_000  # every lease above has ended
        with pytest.raises(NotMasterError):
            await failing.pull("g", "t", None, 10, 0, 30_000)
        failing._propose = propose  # the pull that failed leased nothing: all three again
        assert len((await failing.pull("g", "t", None, 10, 0, 30_000)).taken) == 3

    asyncio.run(run())


def test_a_nack_with_dead_letter_goes_to_the_dlq_at_once_whatever_its_level(log):
    async def run() -> None:
        await _deliver(log, 2)
        consumers = consumers_over(log)  # retry levels (1000,): one retry before the DLQ
        pulled = await consumers.pull("g", "t", None, 2, 0, 30_000)
        assert await consumers.nack("g", "t", pulled.receipts[:1], dead_letter=True) == {
            "retried": 0,
            "dead_lettered": 1,
        }
        assert await consumers.nack("g", "t", pulled.receipts[1:]) == {"retried": 1, "dead_lettered": 0}
        assert log.view.reads.ready_count("%DLQ%g") == 1

    asyncio.run(run())


def test_a_dead_letter_nacked_after_its_ack_is_counted_in_neither_field_and_holds_nothing(log):
    """A dead letter acked, then nacked under the same receipt (a settle sent twice) was
    held in place anyway: counted as retried, and leased (to nobody) until its level's
    delay passed."""

    async def run() -> None:
        await _deliver(log, 1)
        consumers = consumers_over(log)
        pulled = await consumers.pull("g", "t", None, 1, 0, 30_000)
        await consumers.nack("g", "t", pulled.receipts, dead_letter=True)
        dead = await consumers.pull("ops", "%DLQ%g", None, 1, 0, 30_000)
        assert len(dead.taken) == 1
        assert await consumers.ack("ops", "%DLQ%g", dead.receipts) == 1
        assert await consumers.nack("ops", "%DLQ%g", dead.receipts) == {"retried": 0, "dead_lettered": 0}
        assert (await consumers.backlog("ops", "%DLQ%g"))["leased"] == 0

    asyncio.run(run())


def test_a_dead_letter_nacked_by_a_group_reading_the_dlq_comes_back_to_it(log):
    """A group reading another's dead-letter queue (an operator's tool) nacks what it
    could not handle. Its retry went to that group's own retry log, which no pull of the
    DLQ reads: the message reached nobody again, and was in no DLQ. It stays in the DLQ,
    handed out again once the retry level's delay has passed."""

    async def run() -> None:
        await _deliver(log, 1)
        consumers = consumers_over(log)  # retry levels (1000,)
        pulled = await consumers.pull("g", "t", None, 1, 0, 30_000)
        await consumers.nack("g", "t", pulled.receipts, dead_letter=True)
        dead = await consumers.pull("ops", "%DLQ%g", None, 1, 0, 30_000)
        assert len(dead.taken) == 1
        assert await consumers.nack("ops", "%DLQ%g", dead.receipts) == {"retried": 1, "dead_lettered": 0}
        assert len((await consumers.pull("ops", "%DLQ%g", None, 1, 0, 30_000)).taken) == 0
        log.now[0] += 1_000
        await log.propose(SYNC)
        again = await consumers.pull("ops", "%DLQ%g", None, 1, 0, 30_000)
        assert as_json(again, T)["messages"][0]["id"] == as_json(dead, T)["messages"][0]["id"]
        assert log.view.reads.ready_count("%RETRY%ops") == 0

    asyncio.run(run())


def test_a_named_pull_sent_again_after_its_master_died_gets_what_it_leased(log):
    """The master committed a pull's leases and died before answering; the SDK sends the
    same pull (the same ``pull_id``) to the next master, which answers it with those
    messages and lease, not with nothing until the lease ends."""

    async def run() -> None:
        await _deliver(log, 5)
        lost = await consumers_over(log).pull("g", "t", None, 3, 0, 30_000, pull_id="p1")
        successor = consumers_over(log)
        again = await successor.pull("g", "t", None, 3, 0, 30_000, pull_id="p1")
        assert [bytes(r) for r in again.taken.records] == [bytes(r) for r in lost.taken.records]
        other = as_json(await successor.pull("g", "t", None, 10, 0, 30_000, pull_id="p2"), T)["messages"]
        assert [m["body"] for m in other] == ["m3", "m4"]  # the first pull's stay leased to it
        assert await successor.ack("g", "t", again.batch_receipts) == 3  # its receipts are good
        assert await successor.pull("g", "t", None, 3, 0, 30_000, pull_id="p1") is not None
        assert len((await successor.pull("g", "t", None, 3, 0, 30_000, pull_id="p1")).taken) == 0  # acked
        log.now[0] = T + 31_000  # p2's lease ended: p2 sent again leases afresh, not from a dead lease
        assert len((await successor.pull("g", "t", None, 10, 0, 30_000, pull_id="p2")).taken) == 2

    asyncio.run(run())


def test_a_named_pull_sent_again_across_a_new_term_can_still_be_extended_and_released(log):
    """The next master's first entry moved the pull's lease on by the time no master served
    (cluster/leases.py); the pull sent again was answered with receipts naming the lease's
    new end, not its token, and extend and release then found nothing held under them."""

    async def run() -> None:
        log.term = 1
        await _deliver(log, 3)
        await consumers_over(log).pull("g", "t", None, 3, 0, 30_000, pull_id="p1")  # answer lost
        log.term, log.now[0] = 2, T + 20_000
        await log.propose(SYNC)  # the next master's first entry, 20 s on
        successor = consumers_over(log)
        again = await successor.pull("g", "t", None, 3, 0, 30_000, pull_id="p1")
        assert len(again.taken) == 3
        extended, until = await successor.extend("g", "t", again.batch_receipts, 10_000)
        assert extended == 3 and until == T + 50_000  # as moved on (30 s from T + 1, and 19,999 ms)
        assert await successor.release("g", "t", again.batch_receipts) == 3

    asyncio.run(run())


def test_a_master_back_from_a_silence_keeps_its_leases_for_the_time_nobody_served(log):
    """The whole cluster stopped past a 4 s lease; the master resumed leading in the same
    term. Its clock is 7 s on before the entry that gives the leases the silence back has
    applied: by that clock the lease had ended, and a pull handed the message to a second
    consumer while the first could still extend it. Once that entry applied, the master's
    leases that had committed before it take their new ends; a lease taken after the
    silence, whose entry comes after the pause (here it is the pausing entry), keeps its
    end, or the pull sent again found nothing under its name."""

    async def run() -> None:
        log.term = 1
        await _deliver(log, 3)
        consumers = consumers_over(log)
        log.listeners.append(lambda res: res.leases_paused and consumers.pause_leases())
        first = await consumers.pull("g", "t", None, 2, 0, 4_000)
        assert len(first.taken) == 2
        log.now[0] = T + 8_000  # resumed: 7 s past the last entry, nothing applied since
        (later,) = as_json(await consumers.pull("g", "t", None, 3, 0, 4_000, pull_id="p2"), T)["messages"]
        assert later["body"] == "m2"  # its entry, the first after the silence, paused the first two
        (again,) = as_json(await consumers.pull("g", "t", None, 3, 0, 4_000, pull_id="p2"), T)["messages"]
        assert again["body"] == "m2"  # its answer lost: sent again, answered alike
        extended, until = await consumers.extend("g", "t", first.batch_receipts, 1_000)
        assert (extended, until) == (2, T + 12_000)  # as paused, never shorter
        for now in range(T + 8_500, T + 12_001, 500):  # a master serving: an entry every 500 ms
            log.now[0] = now
            await log.propose(SYNC)
            taken = (await consumers.pull("g", "t", None, 3, 0, 4_000)).taken
            assert len(taken) == (3 if now == T + 12_000 else 0)  # once the leases ended

    asyncio.run(run())


def test_a_pull_whose_leases_a_silence_moved_on_as_they_committed_answers_with_them(log):
    """The whole cluster stood still just after a pull's entry applied; the entry after the
    silence applied before the pull looked again, moving its lease on. By its own end the
    lease had ended: the pull scanned again, found the messages held, and answered nothing,
    while the lease kept them from every consumer for the time the silence gave it."""

    async def run() -> None:
        log.term = 1
        await _deliver(log, 1)
        consumers = consumers_over(log)
        log.listeners.append(lambda res: res.leases_paused and consumers.pause_leases())
        propose = log.propose

        async def then_a_silence(kind, **fields):
            done = await propose(kind, **fields)
            if fields.get("leases"):
                log.now[0] += 5_000
                await propose(SYNC)  # the first entry after it: leases get the 5 s back
            return done

        consumers._propose = then_a_silence
        pulled = await consumers.pull("g", "t", None, 1, 0, 4_000)
        consumers._propose = propose
        assert [bytes(r) for r in pulled.taken.records] != []
        assert (await consumers.extend("g", "t", pulled.receipts, 1_000))[0] == 1  # still its lease

    asyncio.run(run())


def test_a_pull_waits_for_a_lease_the_applied_clock_has_not_ended_without_spinning(log):
    """A lease ended by the master's clock but not yet by the clock of the entries it
    applied holds (the lease above). A pull waiting meanwhile woke at the lease's end by
    its own clock, already past, and scanned again at once, over and over, until an
    entry past it applied: it waits as long as the applied clock lags instead."""

    async def run() -> None:
        log.term = 1
        await _deliver(log, 1)
        consumers = consumers_over(log)
        assert len((await consumers.pull("g", "t", None, 1, 0, 1_000)).taken) == 1
        log.now[0] = T + 1_500  # nothing applied since T + 1
        scans = []
        scan = consumers._scan
        consumers._scan = lambda *a, **kw: scans.append(1) or scan(*a, **kw)
        assert len((await consumers.pull("g", "t", None, 1, 300, 1_000)).taken) == 0
        assert len(scans) <= 4  # twice per look (the topic and its retry topic); not hundreds

    asyncio.run(run())


def test_a_named_pull_sent_again_while_it_still_runs_on_the_same_master_gets_its_answer(log):
    """The SDK timed out on a long poll and sent the same pull again to the same master
    while the first still waited there. The second waits for the first, then answers with
    what the first leased: not other messages, which nobody would then hold but a pull
    whose answer is lost, until their lease ends."""

    async def run() -> None:
        consumers = consumers_over(log)
        first = asyncio.create_task(consumers.pull("g", "t", None, 3, 5_000, 30_000, pull_id="p1"))
        await asyncio.sleep(0.05)
        again = asyncio.create_task(consumers.pull("g", "t", None, 3, 5_000, 30_000, pull_id="p1"))
        await asyncio.sleep(0.05)
        await _deliver(log, 5)
        consumers.notify()
        a, b = await first, await again
        assert len(a.taken) == 3
        assert [bytes(r) for r in b.taken.records] == [bytes(r) for r in a.taken.records]
        other = as_json(await consumers.pull("g", "t", None, 10, 0, 30_000, pull_id="p2"), T)["messages"]
        assert [m["body"] for m in other] == ["m3", "m4"]

    asyncio.run(run())


def test_a_purge_acks_what_waits_and_leaves_leased_and_later_messages_alone(log):
    """A task queue's purge: the due messages nobody holds are acked; a consumer keeps what
    it leased (and can still ack it), and another group keeps all of its own."""

    async def run() -> None:
        await _deliver(log, 5)
        consumers = consumers_over(log)
        held = await consumers.pull("g", "t", None, 2, 0, 30_000)
        assert await consumers.backlog("g", "t") == {
            "topic": "t",
            "group": "g",
            "unacked": 5,
            "leased": 2,
            "waiting": 3,
        }
        assert await consumers.purge("g", "t") == 3
        assert await consumers.backlog("g", "t") == {
            "topic": "t",
            "group": "g",
            "unacked": 2,
            "leased": 2,
            "waiting": 0,
        }
        assert len((await consumers.pull("g", "t", None, 10, 0, 30_000)).taken) == 0
        assert await consumers.ack("g", "t", held.batch_receipts) == 2
        assert len((await consumers.pull("other", "t", None, 10, 0, 30_000)).taken) == 5  # one group's purge
        assert await consumers.purge("g", "t") == 0

    asyncio.run(run())


def test_a_message_whose_purge_is_committing_is_handed_out_to_nobody(log):
    """A pull while a purge's acks commit passed over nothing the purge had taken: it
    leased those messages, and answered with them once its leases applied after the acks,
    so a consumer ran what the purge counted as dropped."""

    async def run() -> None:
        await _deliver(log, 3)
        gate = asyncio.Event()
        gated = []

        async def propose(kind, **fields):
            if kind == ACK and not gated:
                gated.append(fields)
                await gate.wait()  # the purge's entry commits slowly
            return await log.propose(kind, **fields)

        consumers = Consumers(log.view, propose, log.clock, (1000,), 50, Receipts("secret"))
        committer = asyncio.get_running_loop().create_task(consumers.run())
        purge = asyncio.create_task(consumers.purge("g", "t"))
        for _ in range(200):
            if gated:
                break  # the purge's acks are on their way
            await asyncio.sleep(0.01)
        pull = asyncio.create_task(consumers.pull("g", "t", None, 10, 0, 30_000))
        await asyncio.sleep(0.01)
        gate.set()
        assert await purge == 3
        assert len((await pull).taken) == 0
        committer.cancel()

    asyncio.run(run())


def test_a_receipt_whose_extended_lease_ended_takes_nothing_a_purge_holds(log):
    """A lease extended, then ended: the master still knew the extend's token for those
    positions, and a purge's hold (a lease no clock reaches) read as that lease, so the
    dead consumer's release gave the held messages back and a pull took them."""

    async def run() -> None:
        await _deliver(log, 1)
        gate = asyncio.Event()
        gated = []

        async def propose(kind, **fields):
            if kind == ACK and fields.get("acks") and not gated:
                gated.append(fields)
                await gate.wait()  # the purge's entry commits slowly
            return await log.propose(kind, **fields)

        consumers = Consumers(log.view, propose, log.clock, (1000,), 50, Receipts("secret"))
        committer = asyncio.get_running_loop().create_task(consumers.run())
        first = await consumers.pull("g", "t", None, 1, 0, 1_000)
        log.now[0] += 500
        await consumers.extend("g", "t", first.receipts, 1_000)
        log.now[0] += 1_001  # the extended lease ended
        await log.propose(SYNC)
        purge = asyncio.create_task(consumers.purge("g", "t"))
        for _ in range(200):
            if gated:
                break
            await asyncio.sleep(0.01)
        release = asyncio.create_task(consumers.release("g", "t", first.receipts))
        await asyncio.sleep(0.01)
        pull = asyncio.create_task(consumers.pull("g", "t", None, 1, 0, 30_000))
        await asyncio.sleep(0.01)
        gate.set()
        assert await purge == 1
        assert await release == 0
        assert len((await pull).taken) == 0
        committer.cancel()

    asyncio.run(run())


def test_a_pull_whose_leases_commit_too_late_hands_out_nothing_they_name(log):
    """A master cut off while its pull's leases were in flight, committed later by the next
    master: by then it may follow, and the leases may have ended, the messages handed to
    another consumer. It answers 503; one that still leads scans again."""
    leading = [True]

    def require_master() -> None:
        if not leading[0]:
            raise NotMasterError(None)

    async def run() -> None:
        await _deliver(log, 2)
        consumers = Consumers(
            log.view, log.propose, log.clock, (1000,), 50, Receipts("secret"), require_master=require_master
        )
        committer = asyncio.create_task(consumers.run())
        propose = log.propose
        late = asyncio.Event()

        async def slow(kind, **fields):  # the leases commit only once the test says so
            if fields.get("leases"):
                await late.wait()
            return await propose(kind, **fields)

        consumers._propose = slow
        pull = asyncio.create_task(consumers.pull("g", "t", None, 1, 0, 500))
        await asyncio.sleep(0.01)
        leading[0] = False  # deposed while they commit
        late.set()
        with pytest.raises(NotMasterError):
            await asyncio.wait_for(pull, 2)

        leading[0], late = True, asyncio.Event()
        pull = asyncio.create_task(consumers.pull("g", "t", None, 1, 0, 500))
        await asyncio.sleep(0.01)
        log.now[0] += 600  # the lease of 500 ms ended before its commit did
        late.set()
        answer = as_json(await asyncio.wait_for(pull, 2), log.now[0])["messages"]
        assert len(answer) == 1 and int(answer[0]["receipt"].split(".")[1]) > log.now[0]
        committer.cancel()

    asyncio.run(run())


async def _a_retry_of_x_tagged_b(log: LocalLog) -> Consumers:
    """Consumers over ``log`` after group g pulled and nacked x's one message, tagged b,
    and its retry (1 s) fired."""
    await log.propose(PRODUCE, messages=[Message("x", b"bx", T, T, tags=("b",))])
    log.now[0] = T + 1
    log.ws = lambda: Watermark(T, ALL)
    await log.propose(SYNC)
    consumers = consumers_over(log)
    (got,) = as_json(await consumers.pull("g", "x", None, 1, 0, 30_000), T)["messages"]
    assert await consumers.nack("g", "x", [got["receipt"]]) == {"retried": 1, "dead_lettered": 0}
    log.now[0] = T + 5_000
    log.ws = lambda: Watermark(T + 5_000, ALL)
    await log.propose(SYNC)
    return consumers


def test_a_pull_of_one_topic_leaves_the_retries_of_another_whatever_their_tags(log):
    """A group's retry topic holds the retries of every topic it pulls. A pull of y whose
    tags reject a retry of x leaves it for x's pulls: it neither hands it out nor skip-acks
    it (the tag prefilter once skip-acked it, and it never came back)."""

    async def run() -> None:
        consumers = await _a_retry_of_x_tagged_b(log)
        assert as_json(await consumers.pull("g", "y", "a", 10, 0, 30_000), T)["messages"] == []
        assert as_json(await consumers.pull("g", "y", "b", 10, 0, 30_000), T)["messages"] == []
        await asyncio.sleep(0.2)  # four ack windows: a skip-ack those pulls queued has committed
        again = as_json(await consumers.pull("g", "x", "a||b", 10, 0, 30_000), T)["messages"]
        assert [m["body"] for m in again] == ["bx"]

    asyncio.run(run())


def test_a_retry_its_own_pull_no_longer_wants_is_passed_over_for_good(log):
    """A retry whose tags the group's filter of its topic now rejects is skip-acked, as
    the topic's own messages are: left, it would hold the group's retry offset forever."""

    async def run() -> None:
        consumers = await _a_retry_of_x_tagged_b(log)
        assert as_json(await consumers.pull("g", "x", "a", 10, 0, 30_000), T)["messages"] == []
        for _ in range(200):  # the skip-ack commits after the pull answers, in the next batch
            if log.view.group_progress("g", retry_topic("g")).committed:
                break
            await asyncio.sleep(0.01)
        assert log.view.group_progress("g", retry_topic("g")).committed == 1

    asyncio.run(run())


def test_a_nack_whose_lease_ended_leaves_a_message_another_consumer_holds_now(log):
    """A consumer's lease ran out and the message went to a second one; the first one's
    nack then filed a retry, and the second one's ack did not stop it: the task ran twice.
    The nack acts only where its receipt's lease is still the message's, or no lease holds
    it; its ack still acks (the work was done)."""

    async def run() -> None:
        await _deliver(log, 2)
        consumers = consumers_over(log)
        first = await consumers.pull("g", "t", None, 2, 0, 1_000)
        log.now[0] += 1_001  # both leases ended
        (second,) = as_json(await consumers.pull("g", "t", None, 1, 0, 30_000), log.now[0])["messages"]
        assert second["body"] == "m0"  # m0 went to a second consumer; m1 waits for a pull
        assert await consumers.nack("g", "t", first.receipts) == {"retried": 1, "dead_lettered": 0}  # m1's
        assert await consumers.ack("g", "t", [second["receipt"]]) == 1
        log.now[0] += 5_000
        log.ws = lambda: Watermark(log.now[0], ALL)
        await log.propose(SYNC)
        again = as_json(await consumers.pull("g", "t", None, 10, 0, 30_000), log.now[0])["messages"]
        assert [(m["body"], m["attempt"]) for m in again] == [("m1", 1)]  # m1's retry; no retry of m0

    asyncio.run(run())


def test_a_message_whose_nack_is_committing_is_handed_out_to_nobody(log):
    """A nack whose lease had ended files the retry; a pull meanwhile handed the message to
    a second consumer, whose ack then stopped nothing: it ran twice."""

    async def run() -> None:
        await _deliver(log, 1)
        gate = asyncio.Event()

        async def propose(kind, **fields):
            if kind == RETRY:
                await gate.wait()  # the nack's entry commits slowly
            return await log.propose(kind, **fields)

        consumers = Consumers(log.view, propose, log.clock, (1000,), 50, Receipts("secret"))
        committer = asyncio.get_running_loop().create_task(consumers.run())
        first = await consumers.pull("g", "t", None, 1, 0, 1_000)
        log.now[0] += 1_001  # its lease ended
        nack = asyncio.create_task(consumers.nack("g", "t", first.receipts))
        await asyncio.sleep(0.01)
        assert len((await consumers.pull("g", "t", None, 1, 0, 30_000)).taken) == 0
        gate.set()
        assert await nack == {"retried": 1, "dead_lettered": 0}
        committer.cancel()

    asyncio.run(run())


def test_an_extend_that_moves_no_lease_leaves_its_pull_named(log):
    """An extend asked for less than the lease still had was committed as a hand-out
    (its end equal to its token): the run lost its pull's name, and the pull sent again
    after its answer was lost leased other messages."""

    async def run() -> None:
        await _deliver(log, 5)
        first = consumers_over(log)
        lost = await first.pull("g", "t", None, 3, 0, 30_000, pull_id="p1")
        entries = len(log.proposed)
        assert await first.extend("g", "t", lost.batch_receipts, 1_000) == (3, T + 1 + 30_000)
        assert len(log.proposed) == entries  # nothing moved: nothing to commit
        again = await consumers_over(log).pull("g", "t", None, 3, 0, 30_000, pull_id="p1")
        assert [bytes(r) for r in again.taken.records] == [bytes(r) for r in lost.taken.records]

    asyncio.run(run())


def test_a_release_or_an_extend_under_a_lease_that_ended_moves_nothing(log):
    """A receipt whose lease ended holds nothing: releasing it gives nothing back, and
    extending it takes back nothing another pull may have had meanwhile."""

    async def run() -> None:
        await _deliver(log, 1)
        consumers = consumers_over(log)
        (got,) = as_json(await consumers.pull("g", "t", None, 1, 0, 30_000), T)["messages"]
        log.now[0] += 30_001  # the lease ended
        await log.propose(SYNC)  # applied at the new time: leases end by it
        entries = len(log.proposed)
        assert await consumers.extend("g", "t", [got["receipt"]], 10_000) == (0, log.now[0] + 10_000)
        assert await consumers.release("g", "t", [got["receipt"]]) == 0
        assert len(log.proposed) == entries  # nothing moved: nothing committed
        (again,) = as_json(await consumers.pull("g", "t", None, 1, 0, 30_000), T)["messages"]
        assert again["id"] == got["id"]

    asyncio.run(run())


@pytest.mark.parametrize("ahead", [True, False])
def test_a_receipt_released_holds_nothing_of_a_later_hand_out_however_its_lease_was_set(log, ahead):
    """A lease's token is the end its pull set. One handed out again after a release may
    end at the very same time: a pull ahead is leased from the message's own time (the
    same for any pull that takes it before then), or a later pull asks a shorter
    visibility. Its token is still new: the first receipt, sent again (a release resent
    after a timeout), gives back nothing the second consumer holds."""

    async def run() -> None:
        if ahead:
            await log.propose(PRODUCE, messages=[Message("t", b"m0", T + 500, T)])
            log.ws = lambda: Watermark(T + 500, ALL)
            await log.propose(SYNC)  # fired 500 ms ahead of its time
        else:
            await _deliver(log, 1)
        consumers = consumers_over(log)

        async def pull(visibility_ms: int) -> dict:
            got = await consumers.pull("g", "t", None, 1, 0, visibility_ms, ahead_ms=1000 if ahead else 0)
            (m,) = as_json(got, T)["messages"]
            return m

        first = await pull(30_000)
        assert await consumers.release("g", "t", [first["receipt"]]) == 1
        log.now[0] += 1
        second = await pull(30_000 if ahead else 29_999)
        assert second["id"] == first["id"]
        assert await consumers.release("g", "t", [first["receipt"]]) == 0  # the resend
        assert len((await consumers.pull("g", "t", None, 1, 0, 30_000)).taken) == 0  # still held
        assert await consumers.release("g", "t", [second["receipt"]]) == 1

    asyncio.run(run())


def test_a_pull_whose_caller_hung_up_leases_nothing(log):
    """A long poll whose caller hung up (its connection closed: node/http/consumers.py)
    leased what arrived meanwhile to nobody, and the next pull found nothing until that
    lease ended (30 s by default). It now leases nothing and says why (499 in the access
    log); the next pull gets the messages at once."""
    hung_up = [False]

    async def run() -> None:
        consumers = consumers_over(log)
        waiting = asyncio.create_task(
            consumers.pull("g", "t", None, 10, 5_000, 30_000, gone=lambda: hung_up[0])
        )
        await asyncio.sleep(0.05)  # waiting: nothing is due yet
        hung_up[0] = True
        await _deliver(log, 2)
        consumers.notify()
        with pytest.raises(CallerGone):
            await asyncio.wait_for(waiting, 2)
        got = as_json(await consumers.pull("g", "t", None, 10, 0, 30_000), T)["messages"]
        assert [m["body"] for m in got] == ["m0", "m1"]
        assert [r.kind for r in log.applied].count(ACK) == 1  # one entry of leases, the second pull's

    asyncio.run(run())


def test_a_waiting_pull_whose_caller_hung_up_ends_without_waiting_out_its_time(log):
    hung_up = [False]

    async def run() -> None:
        consumers = consumers_over(log)
        waiting = asyncio.create_task(
            consumers.pull("g", "t", None, 10, 30_000, 30_000, gone=lambda: hung_up[0])
        )
        await asyncio.sleep(0.05)
        hung_up[0] = True
        with pytest.raises(CallerGone):  # at its next wake, at most a second on
            await asyncio.wait_for(waiting, 2)

    asyncio.run(run())


def test_what_an_extend_remembers_of_a_lease_goes_when_its_message_is_settled(log):
    """A worker that extends every lease (a long task's heartbeat) leaves nothing behind
    once the messages are acked or nacked: the master's memory stays flat however many
    it ran."""

    async def run() -> None:
        await _deliver(log, 6)
        consumers = consumers_over(log)
        got = as_json(await consumers.pull("g", "t", None, 6, 0, 30_000), T)["messages"]
        receipts = [m["receipt"] for m in got]
        assert (await consumers.extend("g", "t", receipts, 60_000))[0] == 6
        assert await consumers.ack("g", "t", receipts[:4]) == 4
        assert await consumers.nack("g", "t", receipts[4:]) == {"retried": 2, "dead_lettered": 0}
        assert {k: v for k, v in consumers._extended.items() if v} == {}
        assert {k: v for k, v in consumers.leases.items() if v} == {}

    asyncio.run(run())


@pytest.mark.parametrize("acked", [False, True])
def test_a_purge_holds_and_acks_a_chunk_at_a_time(log, monkeypatch, acked):
    """A purge of millions held every position at once, in a dict built on the loop, and
    sent every ack before it freed any: it goes a chunk at a time, and a message a pull
    took meanwhile stays with its consumer; one its consumer acked meanwhile is not
    counted as purged."""
    monkeypatch.setattr(service, "PURGE_CHUNK", 100, raising=False)

    async def run() -> None:
        await _deliver(log, 1000)
        consumers = consumers_over(log)
        holds, pulled = [], []
        hold, unheld = consumers.held_meanwhile, consumers._unheld

        def recorded(group, positions):
            holds.append(len(positions))
            return hold(group, positions)

        async def then_a_consumer(group, topic, now):
            waiting = await unheld(group, topic, now)
            # a pull (and maybe its ack) once the purge has read what waits, before its chunks
            got = await consumers.pull("g", "t", None, 5, 0, 30_000, ahead_ms=0)
            pulled.append(len(got.taken))
            if acked:
                await consumers.ack("g", "t", got.receipts)
            return waiting

        consumers.held_meanwhile, consumers._unheld = recorded, then_a_consumer
        purged = await consumers.purge("g", "t")
        assert max(holds) == 100 and len(holds) >= 10
        assert pulled == [5] and purged == 995
        assert log.view.unacked_count("g", "t") == (0 if acked else 5)

    asyncio.run(run())


def test_a_lease_held_long_does_not_stall_the_group_once_scan_limit_later_ones_are_acked(log, monkeypatch):
    """A pull read at most SCAN_LIMIT entries past the group's committed offset, which a
    message leased for long (a Celery task of an hour, its lease renewed) holds back: once
    the group had acked SCAN_LIMIT messages after it, every pull came back empty, however
    many waited. Only entries not acked count now, so leases stay as bounded."""
    monkeypatch.setattr(service, "SCAN_LIMIT", 4)

    async def bodies(consumers, n, visibility_ms=30_000) -> list[dict]:
        return as_json(await consumers.pull("g", "t", None, n, 0, visibility_ms), T)["messages"]

    async def run() -> None:
        await _deliver(log, 10)
        consumers = consumers_over(log)
        assert [m["body"] for m in await bodies(consumers, 1, 3_600_000)] == ["m0"]
        done = await bodies(consumers, 3)
        assert await consumers.ack("g", "t", [m["receipt"] for m in done]) == 3
        got = await bodies(consumers, 10)  # m0 and these three: four not acked, the limit
        assert [m["body"] for m in got] == ["m4", "m5", "m6"]
        assert await consumers.ack("g", "t", [m["receipt"] for m in got]) == 3
        assert [m["body"] for m in await bodies(consumers, 10)] == ["m7", "m8", "m9"]

    asyncio.run(run())


def test_a_retry_fallen_due_is_handed_out_while_its_topic_has_a_backlog(log):
    """The retry log was read only when the topic's own log did not fill the pull: under a
    backlog (a worker pulling one at a time, producers ahead of it) a nacked message came
    back only once the topic drained, whatever its retry level said."""

    async def run() -> None:
        await _deliver(log, 1)
        consumers = consumers_over(log)  # retry levels (1000,)
        (got,) = as_json(await consumers.pull("g", "t", None, 1, 0, 30_000), T)["messages"]
        assert await consumers.nack("g", "t", [got["receipt"]]) == {"retried": 1, "dead_lettered": 0}
        backlog = [Message("t", b"n%d" % i, T + 2_000, T) for i in range(5)]
        await log.propose(PRODUCE, messages=backlog)
        log.now[0] = T + 5_000
        log.ws = lambda: Watermark(T + 5_000, ALL)
        await log.propose(SYNC)  # the retry and the backlog: all due
        first = as_json(await consumers.pull("g", "t", None, 1, 0, 30_000), T)["messages"]
        assert [m["body"] for m in first] == ["m0"]  # the retry, due since T + 1 s

    asyncio.run(run())


def test_a_pull_whose_first_message_was_acked_as_its_leases_committed_answers_the_rest(log):
    """An ack of a message whose lease had ended (a slow consumer, late) committed with or
    right after a new pull's leases of it and others: the pull checked its first position
    alone, found it acked, and scanned again past the others, leased to itself, so they
    went to nobody until their visibility ended (12 h at most)."""

    async def run() -> None:
        await _deliver(log, 2)
        consumers = consumers_over(log)
        propose = consumers._propose

        async def acked_meanwhile(kind, **fields):
            done = await propose(kind, **fields)
            if fields.get("leases"):  # the late ack of the first, committed right after
                await propose(ACK, acks=[("g", "t", 0, 1)], leases=[])
            return done

        consumers._propose = acked_meanwhile
        got = as_json(await consumers.pull("g", "t", None, 2, 0, 30_000), T)["messages"]
        consumers._propose = propose
        assert [m["body"] for m in got] == ["m1"]
        assert log.view.group_progress("g", "t").is_acked(0)

    asyncio.run(run())
