"""The edge benchmark's report: every Horologe figure gets the peer's and a ratio."""

from __future__ import annotations

from bench.edge import report


def test_rows_pair_figures_and_compute_ratios():
    results = {
        "single": {"horologe": {"p99 ms": 12.0, "_samples": [1]}, "redis": {"p99 ms": 0.5}},
        "ingest": {"horologe": {"acked msg/s": 20_000.0}, "redis": {"acked msg/s": 80_000.0}},
        "hot": {
            "horologe": {"last ms": 900.0},
            "redis": {"last ms": 0.0},
            "redis (10 ms poll)": {"last ms": 30.0},
        },
    }
    rows = report.rows(results)
    by = {(r["workload"], r["figure"]): r for r in rows}
    assert by[("single", "p99 ms")]["ratio"] == 24.0 and by[("single", "p99 ms")]["better"] == "lower"
    ingest = by[("ingest", "acked msg/s")]
    assert ingest["ratio"] == 0.25 and ingest["better"] == "higher"
    assert by[("hot", "last ms")]["ratio"] is None  # no ratio against a zero
    assert by[("hot", "last ms [redis 10 ms poll]")]["redis"] == 30.0
    assert not any(r["figure"].startswith("_") for r in rows)  # raw samples are not figures
    table = report.markdown(rows)
    assert "| single | p99 ms | 12.0 | 0.50 | 24.00 (lower is better) |" in table


def test_horologe_with_other_settings_gets_rows_of_its_own_against_the_same_peer():
    results = {
        "single": {
            "horologe": {"p99 ms": 4.0},
            "horologe [fsync = true]": {"p99 ms": 6.0, "_samples": [1]},
            "redis": {"p99 ms": 0.5},
        }
    }
    by = {r["figure"]: r for r in report.rows(results)}
    assert by["p99 ms"]["ratio"] == 8.0
    compared = by["p99 ms [fsync = true]"]
    assert compared["horologe"] == 6.0 and compared["redis"] == 0.5 and compared["ratio"] == 12.0
    assert set(by) == {"p99 ms", "p99 ms [fsync = true]"}


def test_a_checks_tally_gets_no_ratio():
    results = {
        "reschedule": {
            "horologe": {"moved: received (count)": 200},
            "redis": {"moved: received (count)": 200},
        }
    }
    (row,) = report.rows(results)
    assert row["ratio"] is None and row["redis"] == 200


def test_the_durable_peer_gets_rows_of_its_own_beside_the_usual_peer():
    results = {
        "single": {
            "horologe": {"p99 ms": 4.0},
            "redis": {"p99 ms": 0.5},
            report.DURABLE: {"p99 ms": 2.0},
        }
    }
    by = {r["figure"]: r for r in report.rows(results)}
    assert by["p99 ms"]["ratio"] == 8.0
    durable = by["p99 ms [vs durable peer]"]
    assert durable["horologe"] == 4.0 and durable["redis"] == 2.0 and durable["ratio"] == 2.0
