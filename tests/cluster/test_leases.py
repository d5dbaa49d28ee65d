"""Replicated leases: the table's runs, and what A entries do to it on every node."""

from __future__ import annotations

import random

from horologe.cluster import StateMachine
from horologe.cluster.apply_result import ApplyResult
from horologe.cluster.entries import ACK, Entry, decode
from horologe.cluster.leases import SILENCE_MS, LeaseTable, lease_key
from horologe.storage import Storage, StorageConfig
from horologe.storage.delay_index import MS_PER_HOUR
from horologe.wheel import Watermark

from .test_retention import H, delivered, trim

T = 1_767_225_600_000
WS = Watermark(T)


def table_of(runs) -> dict[int, tuple[int, int, int]]:
    """position -> (until, token, deliveries)."""
    return {o: (until, token, n) for lo, hi, until, token, _, n in runs for o in range(lo, hi)}


def test_puts_cuts_and_trims_agree_with_a_map_of_positions():
    """A put whose token is its until is a hand-out (under another token than the run's,
    its count goes up); one whose token differs an extend, of the positions leased under
    that token only, not given back; one with until 0 a release (the count and the token
    stay, nothing is held)."""
    rng = random.Random(7)
    for _ in range(200):
        table, model = LeaseTable(), {}
        for _ in range(rng.randrange(1, 30)):
            lo = rng.randrange(40)
            hi = lo + rng.randrange(0, 8)
            if rng.random() < 0.3:
                table.cut(lo, hi)
                for o in range(lo, hi):
                    model.pop(o, None)
            else:
                until = rng.choice([0, rng.randrange(1, 100)])
                token = rng.choice([until, 7])  # 7: an extend of what a pull leased at 7
                table.put(lo, hi, until, token)
                for o in range(lo, hi):
                    old = model.get(o)
                    if until and token != until:
                        if old is not None and old[1] == token and old[0] != 0:
                            model[o] = (until, token, old[2])
                    elif until:
                        model[o] = (until, token, 1 if old is None else old[2] + (old[1] != token))
                    elif old is not None:
                        model[o] = (0, old[1], old[2])
            runs = list(table)
            assert all(a[1] <= b[0] for a, b in zip(runs, runs[1:], strict=False))  # sorted, disjoint
            assert all(lo < hi for lo, hi, *_ in runs)
            assert table_of(runs) == model
            assert table.deliveries_of(list(range(50))).tolist() == [
                model.get(o, (0, 0, 0))[2] for o in range(50)
            ]
            tokens = [model.get(o, (0, 0, 0))[1] for o in range(50)]
            assert table.tokens_of(list(range(50))).tolist() == tokens
        table.trim(20)
        assert table_of(table) == {o: v for o, v in model.items() if o >= 20}
        assert LeaseTable(table.to_wire()).to_wire() == table.to_wire()
        assert table_of(LeaseTable(table.to_wire())) == table_of(table)


def test_the_entry_round_trips_its_leases_and_older_entries_have_none():
    leases = [("g", "t", 2, 5, T + 9), ("g", "t", 0, 1, T + 20, T + 9), ("g", "t", 7, 8, T + 5, T + 5, "p1")]
    e = Entry(ACK, WS, T, acks=[("g", "t", 0, 2)], leases=leases)
    assert decode(e.encode()).leases == [
        ("g", "t", 2, 5, T + 9, T + 9, ""),
        ("g", "t", 0, 1, T + 20, T + 9, ""),
        ("g", "t", 7, 8, T + 5, T + 5, "p1"),
    ]
    assert decode(Entry(ACK, WS, T, acks=[("g", "t", 0, 2)]).encode()).leases == []


def apply(sm: StateMachine, index: int, entry: Entry) -> None:
    assert sm.apply(index, entry.encode()).error is None


def leases(sm: StateMachine, group="g", topic="t") -> list:
    return [tuple(run) for run in sm.store.meta(lease_key(group, topic)) or ()]


def test_every_node_applies_leases_acks_releases_and_hand_outs_alike(tmp_path):
    def run(path) -> list:
        sm = StateMachine(Storage(str(path), StorageConfig(fsync=False)))
        seen = []
        apply(sm, 1, Entry(ACK, WS, T, leases=[("g", "t", 0, 10, T + 1000), ("h", "t", 0, 4, T + 50)]))
        seen.append((leases(sm), leases(sm, "h")))
        # An ack ends its messages' runs; a release (until 0) gives them back and keeps
        # their count; an extend keeps the token; another group's first run has ended by
        # this entry's clock: it stays, holding nothing but its count.
        apply(
            sm,
            2,
            Entry(
                ACK,
                WS,
                T + 100,
                acks=[("g", "t", 2, 4)],
                leases=[
                    ("g", "t", 5, 6, 0),
                    ("g", "t", 8, 10, T + 5000, T + 1000),
                    ("h", "t", 9, 10, T + 600),
                ],
            ),
        )
        seen.append((leases(sm), leases(sm, "h")))
        # Past every lease's end: what was not acked is handed out again, counted.
        apply(sm, 3, Entry(ACK, WS, T + 6000, acks=[("g", "t", 9, 10)], leases=[("g", "t", 4, 9, T + 9000)]))
        seen.append((leases(sm), leases(sm, "h")))
        sm.store.close()
        return seen

    a = run(tmp_path / "a")
    assert a == run(tmp_path / "b")
    assert a[0] == ([(0, 10, T + 1000, T + 1000)], [(0, 4, T + 50, T + 50)])
    assert a[1] == (
        [
            (0, 2, T + 1000, T + 1000),
            (4, 5, T + 1000, T + 1000),
            (5, 6, 0, T + 1000),
            (6, 8, T + 1000, T + 1000),
            (8, 10, T + 5000, T + 1000),
        ],
        [(0, 4, T + 50, T + 50), (9, 10, T + 600, T + 600)],
    )
    assert a[2] == (
        [(0, 2, T + 1000, T + 1000), (4, 9, T + 9000, T + 9000, "", 2)],
        [(0, 4, T + 50, T + 50), (9, 10, T + 600, T + 600)],  # h's value was not written since
    )
    assert LeaseTable(a[2][0]).deliveries_of([0, 2, 4, 8, 9]).tolist() == [1, 0, 2, 2, 0]


def test_an_extend_moves_only_what_its_hand_out_still_leases_and_keeps_its_name(tmp_path):
    """A worker's renewal may be applied after the ack or the release of what it names
    (sent before either was applied): the ack and the release stand. Without that check
    the extend leased acked positions again, and their run stayed for good."""
    sm = StateMachine(Storage(str(tmp_path), StorageConfig(fsync=False)))
    apply(sm, 1, Entry(ACK, WS, T, leases=[("g", "t", 0, 6, T + 1000, T + 1000, "p1")]))
    apply(sm, 2, Entry(ACK, WS, T + 10, acks=[("g", "t", 0, 2)], leases=[("g", "t", 2, 3, 0)]))
    apply(sm, 3, Entry(ACK, WS, T + 20, leases=[("g", "t", 0, 6, T + 5000, T + 1000)]))
    assert leases(sm) == [(2, 3, 0, T + 1000), (3, 6, T + 5000, T + 1000, "p1")]
    sm.store.close()


def test_a_run_below_the_ready_logs_base_is_forgotten(tmp_path):
    """Retention took positions a group that never acked had leased: their runs go when
    its value is next written, and it holds no count for what the log no longer has."""
    sm = delivered(tmp_path, 10, 6)  # group g acked six: the first segment [0, 4) may go
    ws = T + 2 * MS_PER_HOUR
    apply(sm, 4, Entry(ACK, Watermark(ws), ws, leases=[("h", "t", 0, 10, ws + 50)]))
    sm.apply(5, trim(ws, H, 10))
    assert sm.store.ready_base("t") == 4
    apply(sm, 6, Entry(ACK, Watermark(ws + 100), ws + 100, leases=[("h", "t", 4, 5, 0)]))
    assert leases(sm, "h") == [(4, 5, 0, ws + 50), (5, 10, ws + 50, ws + 50)]
    sm.store.close()


def test_a_named_run_keeps_its_name_through_cuts_and_the_wire():
    table = LeaseTable()
    table.put(0, 10, T + 9, T + 9, "p1")
    table.put(20, 30, T + 9, T + 9)
    table.cut(3, 5)
    assert table.of_pull("p1", T) == [(0, 3, T + 9, T + 9, "p1", 1), (5, 10, T + 9, T + 9, "p1", 1)]
    assert LeaseTable(table.to_wire()).of_pull("p1", T) == table.of_pull("p1", T)
    assert table.to_wire()[-1] == [20, 30, T + 9, T + 9]  # unnamed: four fields, as before names
    assert table.of_pull("p1", T + 9) == []  # ended


def test_a_new_terms_first_entry_gives_running_leases_the_time_no_master_served(tmp_path):
    """A lease could not be extended while no master served: without the pause every lease
    below was lost to a 30 s gap between two terms, and the message went to a second
    consumer as soon as the new master served."""
    sm = StateMachine(Storage(str(tmp_path), StorageConfig(fsync=False)))

    def at(index: int, term: int, clock_ms: int, **kw) -> ApplyResult:
        res = sm.apply(index, Entry(ACK, WS, clock_ms, **kw).encode(), term)
        assert res.error is None
        return res

    at(1, 1, T, leases=[("g", "t", 0, 4, T + 6000), ("g", "t", 4, 6, T + 1000), ("h", "t", 0, 1, T + 9000)])
    at(2, 1, T + 500)
    at(3, 1, T + 1500, leases=[("g", "t", 0, 2, T + 8000, T + 6000)])  # an extend keeps its token
    # Same term, entries under SILENCE_MS apart: nothing moves (4..6 ended at T + 1000,
    # and stays ended).
    ended = (4, 6, T + 1000, T + 1000)
    assert leases(sm) == [(0, 2, T + 8000, T + 6000), (2, 4, T + 6000, T + 6000), ended]
    res = at(4, 2, T + 31_500)  # the next master's first entry, 30 s after the last one
    assert res.leases_paused == (T + 1500, 30_000)  # the master moves its own leases alike
    assert leases(sm) == [(0, 2, T + 38_000, T + 6000), (2, 4, T + 36_000, T + 6000), ended]
    assert leases(sm, "h") == [(0, 1, T + 39_000, T + 9000)]
    at(5, 2, T + 32_500)
    assert at(6, 3, T + 32_000).leases_paused is None  # a master whose clock is behind: nothing to give back
    assert leases(sm) == [(0, 2, T + 38_000, T + 6000), (2, 4, T + 36_000, T + 6000), ended]
    sm.store.close()


def test_a_silence_within_a_term_gives_running_leases_their_time_back(tmp_path):
    """The whole cluster stopped past a lease's end and the old master leading on: its first
    entry after the silence, of the same term, stamped with the time it resumed at (or its
    clock held at the last quorum time, then moving on once a majority's readings are
    fresh again). No consumer could extend a lease meanwhile: without the pause the lease
    below had ended by that entry, and the message went to a second consumer."""
    sm = StateMachine(Storage(str(tmp_path), StorageConfig(fsync=False)))

    def at(index: int, clock_ms: int, **kw) -> ApplyResult:
        res = sm.apply(index, Entry(ACK, WS, clock_ms, **kw).encode(), 1)
        assert res.error is None
        return res

    at(1, T, leases=[("g", "t", 0, 4, T + 4000)])
    at(2, T + 50)  # the master held its time: stale readings, nothing served
    assert at(3, T + SILENCE_MS + 50).leases_paused is None  # a gap of SILENCE_MS is not a silence
    assert leases(sm) == [(0, 4, T + 4000, T + 4000)]
    res = at(4, T + 8000)  # fresh readings again: 6,950 ms on
    assert res.leases_paused == (T + SILENCE_MS + 50, 8000 - SILENCE_MS - 50)
    assert leases(sm) == [(0, 4, T + 4000 + 8000 - SILENCE_MS - 50, T + 4000)]
    sm.store.close()
