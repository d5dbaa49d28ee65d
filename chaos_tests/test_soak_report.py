"""The soak's verdict and figures outlive a missing plot library (a 20-minute run lost its
verdict to matplotlib, which the test extra does not install); its report says when the
longest stretch without an acknowledged produce began, and when the harness itself was
paused (a 16 s stretch in one soak could not be told apart from a cluster that stalled)."""

from __future__ import annotations

import json
import sys

from .checker import time_to_recover
from .history import History
from .soak import PauseProbe
from .soak_report import write_report

NONE = {"n": 0}


def result() -> dict:
    return {
        "seed": 4242,
        "start_ms": 0,
        "duration_s": 60.0,
        "faults": [{"name": "clock_step_behind", "start_ms": 1_000, "end_ms": 3_000}],
        "fault_every_s": 90.0,
        "toxiproxy": "standin",
        "acknowledged": 10,
        "consumed": 10,
        "lost": 0,
        "nacked": 0,
        "nacked_not_retried": 0,
        "duplicates": 0,
        "redeliveries_unexplained": 0,
        "redeliveries": 0,
        "inside_lease": 0,
        "early": 0,
        "cancelled_but_delivered": 0,
        "ready_logs_identical": True,
        "lateness_ms": NONE,
        "consumer_lateness_ms": NONE,
        "early_true_max_ms": 0,
        "early_true_allowance_ms": 50,
        "early_true_beyond_allowance": 0,
        "time_to_recover_ms": 0,
        "time_to_recover_from_ms": None,
        "harness_pauses": {"over_ms": 250, "pauses": []},
        "cancels": 0,
        "produce_failures": 0,
        "rss": [],
        "notes": [],
        "violations": ["lost 1 acknowledged message"],
        "timeline": [(1_000, 5.0)],
        "history": History(seed=4242),
    }


def test_without_matplotlib_the_verdict_and_figures_are_written(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    path = write_report(str(tmp_path), result(), samples=[])
    md = open(path).read()
    assert "Verdict: **FAIL**" in md and "No plot:" in md and "soak.png" not in md
    figures = json.loads((tmp_path / "soak.json").read_text())
    assert figures["violations"] == ["lost 1 acknowledged message"] and figures["seed"] == 4242
    assert (tmp_path / "soak.history.json").exists()


def test_the_report_says_when_the_longest_stretch_began_and_the_harness_s_pauses(tmp_path):
    r = result()
    r.update(
        start_ms=10_000,
        time_to_recover_ms=16_252,
        time_to_recover_from_ms=342_000,
        harness_pauses={"over_ms": 250, "pauses": [(60_000, 400), (358_000, 16_100)]},
    )
    md = open(write_report(str(tmp_path), r, samples=[])).read()
    assert "without an acknowledged produce: 16252 ms, from 332.0 s" in md
    assert "pauses over 250 ms (its load and consumers wait with it): 2; " in md
    assert "the longest 16100 ms, ending at 348.0 s" in md


def test_the_longest_stretch_is_measured_from_the_first_fault_and_says_where_it_began():
    history = {
        "faults": [{"start_ms": 1_000, "end_ms": 2_000}],
        "produced": [{"acked_ms": t} for t in (500, 1_200, 1_300, 4_300, 4_400)],
    }
    assert time_to_recover(history) == (3_000, 1_300)
    assert time_to_recover({**history, "faults": []}) is None


def test_the_pause_probe_records_only_wake_ups_later_than_its_bound():
    probe = PauseProbe(every_s=0.05, reported_ms=250)
    for now_s, true_ms in ((10.0, 0), (10.05, 50), (10.25, 250), (10.85, 850), (10.9, 900)):
        probe.woke(now_s, true_ms)
    assert probe.pauses == [(850, 550)]  # the wake-up at 10.25 came 150 ms late: not a pause
