"""The import contracts hold, and the check that enforces them fails when one is broken.

Each case runs tools/lint_imports.py (what `make lint` runs) on a copy of the source
folders, some with one forbidden import added.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = "Layers: command line over node over cluster over wheel over storage"
PIPELINE = "The pipeline does not import the server or the command line"


def _load_lint():
    spec = importlib.util.spec_from_file_location("lint_imports", ROOT / "tools" / "lint_imports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lint = _load_lint()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """pyproject.toml and the package's folders, as in the repository."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for folder in lint.package_dirs(ROOT).values():
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=lint.SKIP)
    return tmp_path


def _append(path: Path, line: str) -> None:
    with open(path, "a") as f:
        f.write(f"\n{line}\n")


def _contract_lines(out: str) -> dict[str, str]:
    """Contract name -> KEPT or BROKEN, from lint-imports' summary."""
    return {
        line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1]
        for line in out.splitlines()
        if line.endswith((" KEPT", " BROKEN"))
    }


def test_the_tree_keeps_its_contracts_and_every_module_is_seen(repo: Path) -> None:
    done = lint.lint_imports(repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _contract_lines(done.stdout) == {LAYERS: "KEPT", PIPELINE: "KEPT"}
    # Run in place, grimp would see only horologe/; the copy shows it every module.
    files = sum(len(list((repo / folder).rglob("*.py"))) for folder in lint.package_dirs(repo).values())
    assert f"Analyzed {files} files" in done.stdout


def test_storage_importing_the_node_breaks_the_layers(repo: Path) -> None:
    _append(repo / "storage" / "hour_names.py", "import horologe.node")
    done = lint.lint_imports(repo)
    assert done.returncode != 0
    assert _contract_lines(done.stdout)[LAYERS] == "BROKEN"
    assert "horologe.storage.hour_names -> horologe.node" in done.stdout


def test_the_pipeline_importing_the_server_breaks_its_contract(repo: Path) -> None:
    _append(repo / "pipeline" / "report.py", "import horologe.node.errors")
    done = lint.lint_imports(repo)
    assert done.returncode != 0
    assert _contract_lines(done.stdout) == {LAYERS: "KEPT", PIPELINE: "BROKEN"}
    assert "horologe.pipeline.report -> horologe.node.errors" in done.stdout


def test_storage_runtime_imports_are_acyclic(repo: Path) -> None:
    """Storage.check() lives in check.py, which sees the store for type hints only."""
    tree = lint.build_tree(repo)
    probe = (
        "import grimp\n"
        "g = grimp.build_graph('horologe', exclude_type_checking_imports=True, cache_dir=None)\n"
        "print(sorted(g.nominate_cycle_breakers('horologe.storage')))\n"
    )
    # A fresh interpreter in the copy: this one already imported the real horologe.
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=tree, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
