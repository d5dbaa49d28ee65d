"""``python -m bench``: what it refuses before any workload runs, and ``--baseline COMMIT``,
whose nodes come from that commit, laid out apart, not from this tree (a worktree on
PYTHONPATH would run this tree's node code)."""

from __future__ import annotations

import shutil
import subprocess

from click.testing import CliRunner

from bench.__main__ import main
from bench.edge.horologe_system import HorologeSystem
from testkit.old_release import REPO


def test_an_unknown_baseline_is_refused_before_any_workload_runs(tmp_path):
    # Refused for what it is on a machine without redis-server too (a fresh one has none
    # until `make bench`): the options are checked before the machine.
    (tmp_path / "git").symlink_to(shutil.which("git"))
    result = CliRunner().invoke(
        main, ["--only", "consume", "--baseline", "no-such-commit"], env={"PATH": str(tmp_path)}
    )
    assert result.exit_code == 2
    assert "--baseline" in result.output and "no-such-commit" in result.output
    assert "consume on" not in result.output


def test_a_run_without_redis_server_is_refused_before_any_workload_runs(tmp_path):
    result = CliRunner().invoke(main, ["--only", "single"], env={"PATH": str(tmp_path)})
    assert result.exit_code == 2
    assert "redis-server is not on PATH" in result.output and "make bench" in result.output
    assert "single on" not in result.output


def test_the_baseline_lays_out_the_commits_own_node_code(tmp_path):
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD~1"], capture_output=True, text=True, check=True
    ).stdout.strip()
    system = HorologeSystem(str(tmp_path / "baseline"), commit=commit)
    assert system.name == f"horologe [{commit}]"
    laid_out = system.site / "horologe" / "node" / "service.py"
    old = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{commit}:node/service.py"], capture_output=True, check=True
    ).stdout
    assert laid_out.read_bytes() == old
