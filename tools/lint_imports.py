"""Check the import contracts of pyproject.toml ([tool.importlinter]) with lint-imports.

    python tools/lint_imports.py [ROOT]

import-linter (grimp) finds a package's modules by walking its directory, and the
subpackages of ``horologe`` live outside ``horologe/`` (``[tool.setuptools.package-dir]``
maps ``horologe.storage`` to ``storage/`` and so on), so run in the repository it would
see only ``horologe/``. This copies every mapped folder's .py files to where its
subpackage belongs, under ``ROOT/build/importgraph/``, and runs lint-imports there.
It then checks what import-linter cannot say, since it sees an external package by its
top name only: which of our packages alone may import a given *part* of one
(:data:`EXCLUSIVE`). Exits non-zero if lint-imports or that check fails.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

GRAPH_DIR = Path("build", "importgraph")


SKIP = shutil.ignore_patterns("__pycache__", "*.pyc")

# An external module -> the one package of ours that may import it (or any part of it).
EXCLUSIVE = {"aiohttp.web": "horologe.node.http"}
EXCLUSIVE_NAME = "Only the node's HTTP edge (node/http/) imports aiohttp.web"


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


def _imported(tree: ast.AST) -> set[str]:
    """Every absolute module a module's code imports, ``from a import b`` as ``a.b`` too."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def exclusive_imports(tree_root: Path) -> list[str]:
    """``"importer -> imported"`` for each import of an :data:`EXCLUSIVE` module from outside
    the package allowed it, over the copy :func:`build_tree` made."""
    broken = []
    for path in sorted(tree_root.rglob("*.py")):
        module = ".".join(path.relative_to(tree_root).with_suffix("").parts).removesuffix(".__init__")
        for name in sorted(_imported(ast.parse(path.read_text(), str(path)))):
            for external, owner in EXCLUSIVE.items():
                ours = module == owner or module.startswith(f"{owner}.")
                if (name == external or name.startswith(f"{external}.")) and not ours:
                    broken.append(f"{module} -> {name}")
    return broken


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    done = lint_imports(root)
    print(done.stdout, end="")
    print(done.stderr, end="", file=sys.stderr)
    broken = exclusive_imports(root / GRAPH_DIR)
    print(f"{EXCLUSIVE_NAME} {'BROKEN' if broken else 'KEPT'}")
    for line in broken:
        print(f"  {line}")
    sys.exit(done.returncode or (1 if broken else 0))


if __name__ == "__main__":
    main()
