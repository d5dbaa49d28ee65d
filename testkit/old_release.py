"""An older commit of this repository, installed apart and run as node processes: for the
upgrade test (tests/integration/test_upgrade.py, docs/deploy.md "Upgrades").

``install_commit`` takes the commit's tree from git (``git archive``) and lays its
packages out as an install would, following that commit's own
``[tool.setuptools.package-dir]`` (``horologe.storage`` from ``storage/`` and so on), and
compiles them.
The package is pure Python with no package data before the dashboard, so that tree is
what its wheel would unpack to; building a wheel instead would need a setuptools with
``bdist_wheel``, which the venv's own (made by ``python -m venv``) lacks without PyPI.
Its nodes run on the venv's interpreter and dependencies, the tree first on
``PYTHONPATH``, started in a folder outside the repository so that the current
``horologe/`` is not found first.

``UpgradeCluster`` is a :class:`~testkit.process_cluster.Cluster` whose nodes start on
the old code until ``upgrade(i)`` restarts one on the current code, same config and
same data dir.
"""

from __future__ import annotations

import compileall
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

from .process_cluster import ENV, Cluster

REPO = Path(__file__).resolve().parent.parent


class MissingHistoryError(RuntimeError):
    """The clone does not hold the commit (shallow, or history rewritten)."""


def install_commit(commit: str, dest: Path) -> Path:
    """``commit``'s packages, laid out as installed, under ``dest/site``; returns that folder."""
    have = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True, text=True
    )
    if have.returncode != 0:
        raise MissingHistoryError(
            f"commit {commit} is not in {REPO}'s git history ({have.stderr.strip()}); running an older "
            "release from it needs a full clone (not --depth)"
        )
    src, site = dest / "src", dest / "site"
    shutil.rmtree(dest, ignore_errors=True)
    src.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(dest / "src.tar"), commit],
        capture_output=True,
        text=True,
    )
    if archive.returncode != 0:
        raise MissingHistoryError(f"git archive {commit} failed: {archive.stderr.strip()}")
    with tarfile.open(dest / "src.tar") as tar:
        tar.extractall(src, filter="data")
    with open(src / "pyproject.toml", "rb") as f:
        package_dirs = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    # Outer packages first: a subpackage's folder goes inside its parent's copy.
    for package, folder in sorted(package_dirs.items()):
        shutil.copytree(
            src / folder, site.joinpath(*package.split(".")), ignore=shutil.ignore_patterns("__pycache__")
        )
    # Compiled, as pip compiles what it installs and `make bytecode` this tree: else each of
    # its nodes compiles every module again at start, and an A/B's baseline starts slower.
    if not compileall.compile_dir(site, quiet=1):
        raise RuntimeError(f"{commit}'s packages do not compile (see above)")
    return site


def start_old_node(config: str, site: Path, log_dir: str) -> subprocess.Popen:
    """A node of the release in ``site``, started as that release's docs say
    (``python -m horologe node --config``), its log appended to ``<log_dir>/<name>.log``."""
    name = os.path.basename(config)[:-5]
    with open(os.path.join(log_dir, f"{name}.log"), "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "horologe", "node", "--config", config],
            env={**os.environ, **ENV, "PYTHONPATH": str(site)},
            cwd=str(site.parent),  # not the repository: its horologe/ would come first
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


class UpgradeCluster(Cluster):
    """Every node starts on the release in ``site`` until :meth:`upgrade` moves it on."""

    def __init__(self, root: str, site: Path, **kwargs) -> None:
        super().__init__(root, **kwargs)
        self.site = site
        self.old = set(self.indexes)

    def start(self, i: int) -> None:
        if i in self.old:
            self.procs[i] = start_old_node(self.configs[i], self.site, self.root)
        else:
            super().start(i)

    def upgrade(self, i: int) -> None:
        """Stop node i (SIGTERM, as an operator would) and start it on the current code."""
        self.stop(i)
        self.old.discard(i)
        self.start(i)
