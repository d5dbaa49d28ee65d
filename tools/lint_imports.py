"""Check the import contracts of pyproject.toml ([tool.importlinter]) with lint-imports.

    python tools/lint_imports.py [ROOT]

import-linter (grimp) finds a package's modules by walking its directory, and the
subpackages of ``horologe`` live outside ``horologe/`` (``[tool.setuptools.package-dir]``
maps ``horologe.storage`` to ``storage/`` and so on), so run in the repository it would
see only ``horologe/``. This copies every mapped folder's .py files to where its
subpackage belongs, under ``ROOT/build/importgraph/``, and runs lint-imports there.
Exits with lint-imports' status.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

GRAPH_DIR = Path("build", "importgraph")


SKIP = shutil.ignore_patterns("__pycache__", "*.pyc")


def package_dirs(root: Path) -> dict[str, str]:
    """``[tool.setuptools.package-dir]``: package name -> folder."""
    with open(root / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]["package-dir"]


def build_tree(root: Path) -> Path:
    """A fresh copy of the package as installed, under ``root/build/importgraph``; returns it."""
    tree = root / GRAPH_DIR
    shutil.rmtree(tree, ignore_errors=True)
    # Outer packages first: a subpackage's copy goes inside its parent's.
    for package, folder in sorted(package_dirs(root).items()):
        shutil.copytree(root / folder, tree.joinpath(*package.split(".")), ignore=SKIP)
    return tree


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """Run lint-imports over ``build_tree(root)`` with ``root``'s contracts; output is captured."""
    tree = build_tree(root)
    # lint-imports puts its working directory first on sys.path, so it runs inside the
    # copy; otherwise the repository's own horologe/ would be found first.
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(exe), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
    )


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    done = lint_imports(root)
    print(done.stdout, end="")
    print(done.stderr, end="", file=sys.stderr)
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
