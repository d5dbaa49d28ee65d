"""The import contracts hold, and the check that enforces them fails when one is broken.

Each case runs tools/lint_imports.py (what `make lint` runs) on a copy of the source
folders, some with one forbidden import added.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = "Layers: command line over node over cluster over wheel over storage"
PIPELINE = "The pipeline does not import the server or the command line"
NODE = "Inside the node: the edge over the service over its parts"
RAFT = "Only the Raft shell (cluster/raft/) imports pysyncobj"
STORAGE_ACYCLIC = "No import cycles among the storage engine's modules"
CLUSTER_ACYCLIC = "No import cycles among the cluster's modules"
NODE_ACYCLIC = "No import cycles among the node's modules"
KEPT = {
    LAYERS: "KEPT",
    PIPELINE: "KEPT",
    NODE: "KEPT",
    RAFT: "KEPT",
    STORAGE_ACYCLIC: "KEPT",
    CLUSTER_ACYCLIC: "KEPT",
    NODE_ACYCLIC: "KEPT",
}


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
        m[1]: m[2]
        for m in map(re.compile(r"(.*) (KEPT|BROKEN)(?: \(\d+ ignored imports?\))?$").match, out.splitlines())
        if m
    }


def test_the_tree_keeps_its_contracts_and_every_module_is_seen(repo: Path) -> None:
    done = lint.lint_imports(repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _contract_lines(done.stdout) == KEPT
    assert lint.exclusive_imports(repo / lint.GRAPH_DIR) == []
    # Run in place, grimp would see only horologe/; the copy shows it every module.
    files = sum(len(list((repo / folder).rglob("*.py"))) for folder in lint.package_dirs(repo).values())
    assert _our_modules(lint.build_tree(repo)) == files


def _our_modules(tree: Path) -> int:
    """How many of horologe's modules grimp finds in the copy (its summary counts external
    packages too)."""
    probe = "import grimp\ng = grimp.build_graph('horologe', cache_dir=None)\nprint(len(g.modules))\n"
    # A fresh interpreter in the copy: this one already imported the real horologe.
    out = subprocess.run([sys.executable, "-c", probe], cwd=tree, capture_output=True, text=True, check=True)
    return int(out.stdout)


def _failing_lint(repo: Path, module: str, line: str) -> str:
    """lint-imports' output once ``line`` is added to ``module`` (a path in ``repo``), which
    must make it fail."""
    _append(repo / module, line)
    done = lint.lint_imports(repo)
    assert done.returncode != 0, done.stdout
    return done.stdout


def test_storage_importing_the_node_breaks_the_layers(repo: Path) -> None:
    out = _failing_lint(repo, "storage/hour_names.py", "import horologe.node")
    assert _contract_lines(out)[LAYERS] == "BROKEN"
    assert "horologe.storage.hour_names -> horologe.node" in out


def test_the_pipeline_importing_the_server_breaks_its_contract(repo: Path) -> None:
    out = _failing_lint(repo, "pipeline/report.py", "import horologe.node.errors")
    assert _contract_lines(out) == {**KEPT, PIPELINE: "BROKEN"}
    assert "horologe.pipeline.report -> horologe.node.errors" in out


def _type_only(line: str) -> str:
    """``line`` as an import for type hints only, which the acyclic contracts count too."""
    return f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    {line}"


# The key index is handed the open batch: it must not reach back to the store that owns it,
# not even for a type hint.
@pytest.mark.parametrize(
    "line",
    ["from horologe.storage.store import Storage", _type_only("from .store import Storage")],
    ids=["runtime", "type-only"],
)
def test_a_cyclic_import_in_storage_breaks_its_contract(repo: Path, line: str) -> None:
    out = _failing_lint(repo, "storage/key_index.py", line)
    assert _contract_lines(out) == {**KEPT, STORAGE_ACYCLIC: "BROKEN"}
    assert "No cycles are allowed in horologe.storage." in out


def test_schedule_apply_reaching_back_to_the_state_machine_breaks_the_cluster_contract(repo: Path) -> None:
    back_edge = _type_only("from .state_machine import StateMachine")
    out = _failing_lint(repo, "cluster/schedule_apply.py", back_edge)
    assert _contract_lines(out) == {**KEPT, CLUSTER_ACYCLIC: "BROKEN"}
    assert "No cycles are allowed in horologe.cluster." in out


def test_the_committed_view_reaching_up_to_the_consumers_breaks_the_node_contract(repo: Path) -> None:
    out = _failing_lint(repo, "node/committed_view.py", "import horologe.node.consumers.service")
    assert _contract_lines(out) == {**KEPT, NODE_ACYCLIC: "BROKEN"}
    assert "No cycles are allowed in horologe.node." in out


def test_storage_runtime_imports_are_acyclic(repo: Path) -> None:
    """Also without the type-only imports, which the contract above counts."""
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


@pytest.mark.parametrize(
    "importer, line, shown",
    [
        ("node/push/flow.py", "import horologe.node.schedules.driver", "horologe.node.push.flow ->"),
        ("node/service.py", "import horologe.node.http.common", "horologe.node.service ->"),
        ("node/consumers/receipts.py", "import horologe.node.push.signature", "consumers.receipts ->"),
    ],
)
def test_an_upward_or_sideways_import_inside_the_node_breaks_its_layers(repo, importer, line, shown):
    out = _failing_lint(repo, importer, line)
    broken = {name for name, verdict in _contract_lines(out).items() if verdict == "BROKEN"}
    assert NODE in broken and broken <= {NODE, NODE_ACYCLIC}  # a sideways import may close a cycle too
    assert shown in out


def test_pysyncobj_outside_the_raft_shell_breaks_its_contract(repo: Path) -> None:
    out = _failing_lint(repo, "cluster/state_machine.py", "import pysyncobj.syncobj")
    assert _contract_lines(out) == {**KEPT, RAFT: "BROKEN"}
    assert "horologe.cluster.state_machine -> pysyncobj" in out


def test_aiohttp_web_outside_the_http_edge_is_named(repo: Path) -> None:
    _append(repo / "node" / "service.py", "from aiohttp import web")
    _append(repo / "node" / "http" / "common.py", "import aiohttp.web_response")
    tree = lint.build_tree(repo)
    assert lint.exclusive_imports(tree) == ["horologe.node.service -> aiohttp.web"]
