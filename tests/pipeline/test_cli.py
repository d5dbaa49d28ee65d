"""``horologe spark schedule`` and ``horologe spark audit`` end to end."""

from __future__ import annotations

import time

from click.testing import CliRunner

from horologe.cli import main
from testkit.process_cluster import CLIENT
from testkit.waiting import wait_until


def test_schedule_then_audit(spark, make_cluster, tmp_path):
    cluster = make_cluster()
    src = tmp_path / "rows.json"
    now = int(time.time() * 1000)
    with open(src, "w") as f:
        for k in range(50):
            topic = "bad topic" if k == 13 else "orders"
            f.write(f'{{"t": "{topic}", "b": "order {k}", "at": {now + 500 + k}, "tags": ["a"]}}\n')
    env = {"HOROLOGE_CLIENT_TOKEN": CLIENT, "HOROLOGE_URL": ",".join(cluster.url(i) for i in cluster.indexes)}
    r = CliRunner(env=env).invoke(
        main,
        [
            "spark",
            "schedule",
            str(src),
            "--topic-col",
            "t",
            "--body-col",
            "b",
            "--deliver-at-col",
            "at",
            "--tags-col",
            "tags",
            "--rejects",
            str(tmp_path / "rej"),
            "--master",
            "local[2]",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "rows 50: accepted 49, rejected 1" in r.output

    def n1_delivered_them() -> bool:
        """n1, whose store the audit reads, delivered all 49 (due within a second)."""
        return cluster.status(0)["counters"]["delivered"] >= 49

    wait_until(n1_delivered_them, 30)
    cluster.stop_all()
    r = CliRunner().invoke(main, ["spark", "audit", cluster.root + "/n1", "--out", str(tmp_path / "audit")])
    assert r.exit_code == 0, r.output
    assert "49 messages, 49 deliveries; duplicates 0, missing 0, cancelled 0" in r.output
    assert (tmp_path / "audit" / "report.md").exists()


def test_schedule_refuses_a_bad_mapping(tmp_path):
    src = tmp_path / "rows.csv"
    src.write_text("a,b\n1,2\n")
    r = CliRunner().invoke(main, ["spark", "schedule", str(src), "--topic", "t", "--body-col", "b"])
    assert r.exit_code == 1 and "exactly one of --deliver-at-col" in r.output
