"""The soak's verdict and figures outlive a missing plot library (a 20-minute run lost its
verdict to matplotlib, which the test extra does not install)."""

from __future__ import annotations

import json
import sys

from .history import History
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
