"""``horologe storage check|inspect`` on real data directories."""

from __future__ import annotations

import os

from click.testing import CliRunner

from horologe.cli import main
from horologe.storage import Message, Storage

H0 = 491_000 * 3_600_000


def make_store(root: str) -> None:
    with Storage(root) as s:
        s.apply(1, lambda tx: tx.append([Message("orders", b"x", H0 + h * 3_600_000, H0) for h in range(3)]))


def test_check_reports_a_healthy_store(tmp_path):
    make_store(str(tmp_path))
    r = CliRunner().invoke(main, ["storage", "check", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "ok: 3 messages in 3 hours" in r.output


def test_check_fails_on_corruption_with_file_and_offset(tmp_path):
    make_store(str(tmp_path))
    logs = sorted(n for n in os.listdir(tmp_path / "delay") if n.endswith(".log"))
    log = os.path.join(tmp_path, "delay", logs[0])
    with open(log, "r+b") as f:
        f.seek(20)
        f.write(b"\xff")
    r = CliRunner().invoke(main, ["storage", "check", str(tmp_path)])
    assert r.exit_code == 1
    assert "corrupt" in r.output and log in r.output


def test_refuses_a_directory_that_is_not_a_store(tmp_path):
    r = CliRunner().invoke(main, ["storage", "inspect", str(tmp_path)])
    assert r.exit_code == 1 and "not a Horologe data directory" in r.output


def test_inspect_lists_hours(tmp_path):
    make_store(str(tmp_path))
    r = CliRunner().invoke(main, ["storage", "inspect", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert r.output.count(" 1 messages") == 3 and "applied index  1" in r.output
